'use strict';
// Many clients writing while change streams tail: every tailer sees every
// acknowledged write exactly once, in cluster-time order, and the collection
// ends in the state the writers produced. Runs under ASan in CI.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const { startStore } = require('../lib/server');

const WRITERS = 8;
const PER_WRITER = 60;

test('concurrent writers and change-stream tailers agree on every write', async () => {
  const server = await startStore({ replSet: 'rs0' });
  const uri = server.uri({ replicaSet: 'rs0', directConnection: 'false' });
  const clients = [];
  const connect = async () => {
    const c = new MongoClient(uri, { serverSelectionTimeoutMS: 10000, maxPoolSize: 4 });
    await c.connect();
    clients.push(c);
    return c;
  };
  try {
    const admin = await connect();
    const name = `conc_${process.pid}`;
    await admin.db('conc').createCollection(name);
    const tailers = [];
    for (let t = 0; t < 2; t++) {
      const c = await connect();
      const stream = c.db('conc').collection(name).watch([], { maxAwaitTimeMS: 500 });
      await stream.tryNext();
      tailers.push(stream);
    }
    const writers = Array.from({ length: WRITERS }, async (_, w) => {
      const coll = (await connect()).db('conc').collection(name);
      for (let i = 0; i < PER_WRITER; i++) {
        const id = `${w}-${i}`;
        await coll.insertOne({ _id: id, w, i, v: 0 });
        await coll.updateOne({ _id: id }, { $inc: { v: 1 } });
        if (i % 4 === 3) await coll.deleteOne({ _id: id });
      }
    });
    await Promise.all(writers);
    const expected = WRITERS * PER_WRITER * 2 + WRITERS * (PER_WRITER / 4);
    for (const stream of tailers) {
      const seen = new Set();
      let last = null;
      for (let k = 0; k < expected; k++) {
        const ev = await stream.next();
        const key = `${ev.operationType}:${ev.documentKey._id}`;
        assert.ok(!seen.has(key), `event ${key} delivered twice`);
        seen.add(key);
        if (last) assert.ok(ev.clusterTime.comp(last) > 0, 'events arrive in strictly increasing cluster time');
        last = ev.clusterTime;
      }
      assert.equal(seen.size, expected);
      assert.equal(await stream.tryNext(), null, 'no extra events');
      await stream.close();
    }
    const docs = await admin.db('conc').collection(name).find().toArray();
    assert.equal(docs.length, WRITERS * PER_WRITER * 3 / 4);
    assert.ok(docs.every((d) => d.v === 1));
  } finally {
    for (const c of clients) await c.close().catch(() => {});
    await server.cleanup();
  }
});

test('writers racing on one document all succeed: no WriteConflict reaches a client and every $inc counts', async () => {
  const server = await startStore({ replSet: 'rs0' });
  const uri = server.uri({ replicaSet: 'rs0', directConnection: 'false' });
  const clients = [];
  try {
    const RACERS = 16;
    const EACH = 40;
    for (let r = 0; r < RACERS; r++) {
      // One connection each, no driver retries: every conflict is the server's to absorb.
      const c = new MongoClient(uri, { serverSelectionTimeoutMS: 10000, maxPoolSize: 1, retryWrites: false });
      await c.connect();
      clients.push(c);
    }
    const name = `hot_${process.pid}`;
    await clients[0].db('conc').collection(name).insertOne({ _id: 'hot', v: 0 });
    const errors = [];
    await Promise.all(clients.map(async (c) => {
      const coll = c.db('conc').collection(name);
      for (let i = 0; i < EACH; i++) {
        try {
          const r = await coll.updateOne({ _id: 'hot' }, { $inc: { v: 1 } }, { writeConcern: { w: 1, j: true } });
          if (r.modifiedCount !== 1) errors.push(`modifiedCount ${r.modifiedCount}`);
        } catch (e) {
          errors.push(`${e.code} ${e.message}`);
        }
      }
    }));
    assert.deepEqual(errors, []);
    const doc = await clients[0].db('conc').collection(name).findOne({ _id: 'hot' });
    assert.equal(doc.v, RACERS * EACH);
  } finally {
    for (const c of clients) await c.close().catch(() => {});
    await server.cleanup();
  }
});

test('concurrent inserts of case variants into a unique case-insensitive index: exactly one wins per name', async () => {
  const server = await startStore();
  const clients = [];
  try {
    const RACERS = 8;
    const NAMES = 30;
    for (let r = 0; r < RACERS; r++) {
      const c = new MongoClient(server.uri(), { serverSelectionTimeoutMS: 10000, maxPoolSize: 1, retryWrites: false });
      await c.connect();
      clients.push(c);
    }
    const name = `ci_${process.pid}`;
    const ci = { locale: 'en', strength: 2 };
    await clients[0].db('conc').createCollection(name, { collation: ci });
    await clients[0].db('conc').collection(name).createIndex({ name: 1 }, { unique: true });
    // Racer r writes every name with its own casing (bit i of r upper-cases letter i).
    const casing = (base, r) => [...base].map((ch, i) => ((r >> i) & 1 ? ch.toUpperCase() : ch)).join('');
    const outcomes = await Promise.all(clients.map(async (c, r) => {
      const coll = c.db('conc').collection(name);
      const won = [];
      for (let n = 0; n < NAMES; n++) {
        try {
          await coll.insertOne({ name: casing(`name${n}`, r), r });
          won.push(n);
        } catch (e) {
          if (e.code !== 11000) throw e;
        }
      }
      return won;
    }));
    const wins = outcomes.flat().sort((a, b) => a - b);
    assert.deepEqual(wins, Array.from({ length: NAMES }, (_, n) => n), 'each name inserted exactly once');
    const coll = clients[0].db('conc').collection(name);
    assert.equal(await coll.countDocuments({}), NAMES);
    for (let n = 0; n < NAMES; n += 7) assert.equal(await coll.countDocuments({ name: `NAME${n}` }), 1);
  } finally {
    for (const c of clients) await c.close().catch(() => {});
    await server.cleanup();
  }
});
