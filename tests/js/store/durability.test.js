'use strict';
// Crash durability: kill -9 the store while acknowledged writes are in flight,
// restart it on the same data, and check that every acknowledged write (and its
// index entries) survived, and that every acknowledged delete stayed deleted.

const test = require('node:test');
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const { startStore } = require('../lib/server');

const WRITERS = 8;

async function runUntilKilled(server, coll, ackedTarget) {
  // deleteSent: deletes issued, acknowledged or not (one in flight at the kill may have applied).
  const acked = { inserted: new Set(), deleted: new Set(), deleteSent: new Set(), incs: new Map() };
  let total = 0;
  let killing = null;
  const writer = async (w) => {
    for (let i = 0; ; i++) {
      const id = w * 1_000_000 + i;
      try {
        await coll.insertOne({ _id: id, k: id, g: id % 10, pad: 'x'.repeat(200) });
        acked.inserted.add(id);
        if (i % 3 === 2) {
          const target = id - 1;
          await coll.updateOne({ _id: target }, { $inc: { n: 1 } });
          acked.incs.set(target, (acked.incs.get(target) || 0) + 1);
        }
        if (i % 5 === 4) {
          const target = id - 2;
          acked.deleteSent.add(target);
          await coll.deleteOne({ _id: target });
          acked.deleted.add(target);
        }
      } catch (e) {
        if (killing) return; // the server is gone: in-flight writes have no outcome
        throw e;
      }
      total++;
      if (total >= ackedTarget && !killing) killing = server.kill();
    }
  };
  await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)));
  await killing;
  return acked;
}

test('acknowledged writes survive kill -9 with their indexes', async () => {
  const server = await startStore({ keepDbpath: false });
  const opts = { serverSelectionTimeoutMS: 5000, retryWrites: false };
  let client = new MongoClient(server.uri(), opts);
  await client.connect();
  let coll = client.db('durable').collection('orders');
  await coll.createIndex({ k: 1 }, { unique: true });
  await coll.createIndex({ g: 1, k: -1 });
  const target = 300 + Math.floor(Math.random() * 300);
  const acked = await runUntilKilled(server, coll, target);
  await client.close(true).catch(() => {});

  await server.restart();
  client = new MongoClient(server.uri(), opts);
  await client.connect();
  coll = client.db('durable').collection('orders');
  try {
    const live = [...acked.inserted].filter((id) => !acked.deleteSent.has(id));
    assert.ok(live.length >= 100, `expected many acknowledged inserts, got ${live.length}`);
    const docs = await coll.find({ _id: { $in: live } }).toArray();
    assert.equal(docs.length, live.length, 'every acknowledged insert is present after the crash');
    for (const d of docs) {
      const incs = acked.incs.get(d._id) || 0;
      assert.ok((d.n || 0) >= incs, `doc ${d._id}: ${d.n || 0} increments stored, ${incs} acknowledged`);
    }
    for (const id of acked.deleted) {
      assert.equal(await coll.countDocuments({ _id: id }), 0, `acknowledged delete of ${id} stayed deleted`);
    }
    // The indexes agree with the documents.
    const byUnique = await coll.find({ k: { $in: live } }).hint({ k: 1 }).toArray();
    assert.equal(byUnique.length, live.length, 'unique index has every document');
    const total = await coll.countDocuments({});
    const viaCompound = await coll.countDocuments({ g: { $gte: 0 } }, { hint: { g: 1, k: -1 } });
    assert.equal(viaCompound, total, 'compound index has exactly the stored documents');
    const indexes = (await coll.indexes()).map((i) => i.name).sort();
    assert.deepEqual(indexes, ['_id_', 'g_1_k_-1', 'k_1']);
    // The store still enforces uniqueness after recovery.
    await assert.rejects(coll.insertOne({ _id: 'dup', k: live[0] }), (e) => e.code === 11000);
  } finally {
    await client.close();
    await server.stop();
  }
});

// One command, many statements: each statement commits as it runs, and the command's
// writes are made durable together before its reply (one journal sync, or one per
// CommandDurability::kMaxStatements). Batches larger than that bound cross it.
test('acknowledged multi-statement commands survive kill -9 whole', async () => {
  const server = await startStore({ keepDbpath: false });
  const opts = { serverSelectionTimeoutMS: 5000, retryWrites: false };
  let client = new MongoClient(server.uri(), opts);
  await client.connect();
  let coll = client.db('durable').collection('batches');
  const BATCH = 300;
  const inserted = new Set();
  const bumped = new Map(); // _id -> acknowledged increments
  let acked = 0;
  let killing = null;
  const target = 20 + Math.floor(Math.random() * 20);
  const writer = async (w) => {
    for (let b = 0; ; b++) {
      const base = (w * 1000 + b) * BATCH;
      const docs = Array.from({ length: BATCH }, (_, i) => ({ _id: base + i, n: 0, pad: 'y'.repeat(100) }));
      try {
        await coll.insertMany(docs, { ordered: b % 2 === 0 });
        for (const d of docs) inserted.add(d._id);
        const ops = docs.map((d) => ({ updateOne: { filter: { _id: d._id }, update: { $inc: { n: 1 } } } }));
        await coll.bulkWrite(ops, { ordered: false });
        for (const d of docs) bumped.set(d._id, 1);
      } catch (e) {
        if (killing) return;
        throw e;
      }
      acked++;
      if (acked >= target && !killing) killing = server.kill();
    }
  };
  await Promise.all([0, 1, 2, 3].map(writer));
  await killing;
  await client.close(true).catch(() => {});

  await server.restart();
  client = new MongoClient(server.uri(), opts);
  await client.connect();
  coll = client.db('durable').collection('batches');
  try {
    assert.ok(inserted.size >= 10 * BATCH, `expected many acknowledged batches, got ${inserted.size} documents`);
    const docs = await coll.find({ _id: { $in: [...inserted] } }, { projection: { n: 1 } }).toArray();
    assert.equal(docs.length, inserted.size, 'every document of every acknowledged insertMany is present');
    const missingIncs = docs.filter((d) => (bumped.get(d._id) || 0) > d.n).map((d) => d._id);
    assert.deepEqual(missingIncs.slice(0, 5), [], 'every acknowledged bulk update is present');
  } finally {
    await client.close();
    await server.stop();
  }
});
