'use strict';
// TTL indexes: the store's TTL monitor removes documents whose indexed date is older
// than expireAfterSeconds, as mongod's does (every ttlMonitorSleepSecs; here 1 s), and
// each removal is an ordinary replicated delete that change streams see.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const { startStore, haloclineBinary } = require('../lib/server');
const { runProgram } = require('../lib/run');

/** Waits until the TTL monitor has finished `n` more passes than `since` (serverStatus). */
async function ttlPasses(admin, since, n, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const passes = Number((await admin.command({ serverStatus: 1 })).metrics.ttl.passes);
    if (passes >= since + n) return passes;
    assert.ok(Date.now() < deadline, `the TTL monitor ran ${passes - since} passes, expected ${n}`);
    await new Promise((r) => setImmediate(r));
  }
}

test('a TTL index removes expired documents (dates and arrays of dates), leaves the rest, and replicates the deletes', async () => {
  const server = await startStore({ replSet: 'rs0', extraArgs: ['--setParameter', 'ttlMonitorSleepSecs=1'] });
  const c = new MongoClient(server.uri(), { serverSelectionTimeoutMS: 10000 });
  try {
    await c.connect();
    const admin = c.db('admin');
    const coll = c.db('ttl').collection('sessions');
    await coll.createIndex({ at: 1 }, { expireAfterSeconds: 60 });
    const indexes = await coll.indexes();
    assert.equal(indexes.find((i) => i.name === 'at_1').expireAfterSeconds, 60);
    const now = Date.now();
    const stream = coll.watch([{ $match: { operationType: 'delete' } }]);
    await stream.tryNext(); // opens the stream before the writes
    await coll.insertMany([
      { _id: 'old', at: new Date(now - 3_600_000) },
      { _id: 'fresh', at: new Date(now) },
      { _id: 'future', at: new Date(now + 3_600_000) },
      { _id: 'oldInArray', at: [new Date(now + 3_600_000), new Date(now - 3_600_000)] },
      { _id: 'notADate', at: 'yesterday' },
      { _id: 'noField' },
    ]);
    const before = Number((await admin.command({ serverStatus: 1 })).metrics.ttl.passes);
    // Two passes: the first may have started before the inserts.
    await ttlPasses(admin, before, 2);
    const left = (await coll.find().sort({ _id: 1 }).toArray()).map((d) => d._id);
    assert.deepEqual(left, ['fresh', 'future', 'noField', 'notADate']);
    const status = await admin.command({ serverStatus: 1 });
    assert.ok(Number(status.metrics.ttl.deletedDocuments) >= 2);
    // The removals are ordinary deletes: a change stream sees both.
    const deleted = [];
    while (deleted.length < 2) {
      const ev = await stream.next();
      deleted.push(ev.documentKey._id);
    }
    assert.deepEqual(deleted.sort(), ['old', 'oldInArray']);
    await stream.close();
  } finally {
    await c.close();
    await server.cleanup();
  }
});

/** Runs fn(client) against a fresh standalone store whose TTL monitor runs every second. */
async function withTtlStore(fn) {
  const server = await startStore({ extraArgs: ['--setParameter', 'ttlMonitorSleepSecs=1'] });
  const c = new MongoClient(server.uri(), { serverSelectionTimeoutMS: 10000 });
  try {
    await c.connect();
    await fn(c);
  } finally {
    await c.close();
    await server.cleanup();
  }
}

test('a capped collection is never expired', () =>
  withTtlStore(async (c) => {
    const admin = c.db('admin');
    const db = c.db('ttl');
    await db.createCollection('capped', { capped: true, size: 1 << 20 });
    await db.collection('capped').createIndex({ at: 1 }, { expireAfterSeconds: 0 });
    await db.collection('capped').insertOne({ _id: 1, at: new Date(0) });
    const before = Number((await admin.command({ serverStatus: 1 })).metrics.ttl.passes);
    await ttlPasses(admin, before, 2);
    assert.equal(await db.collection('capped').countDocuments(), 1);
  }));

test('a clustered collection with expireAfterSeconds expires documents whose _id is an old date', () =>
  withTtlStore(async (c) => {
    const admin = c.db('admin');
    const db = c.db('ttl');
    await db.createCollection('clustered', { clusteredIndex: { key: { _id: 1 }, unique: true }, expireAfterSeconds: 60 });
    const coll = db.collection('clustered');
    const now = Date.now();
    await coll.insertMany([
      { _id: new Date(now - 3_600_000), v: 'old' },
      { _id: new Date(now), v: 'fresh' },
      { _id: 'notADate', v: 'kept' },
    ]);
    const before = Number((await admin.command({ serverStatus: 1 })).metrics.ttl.passes);
    await ttlPasses(admin, before, 2);
    assert.deepEqual((await coll.find({}, { projection: { _id: 0 } }).sort({ v: 1 }).toArray()).map((d) => d.v), ['fresh', 'kept']);
  }));

test('--setParameter refuses unknown names and bad values, naming them', async () => {
  const bad = await runProgram(haloclineBinary(), ['store', '--port', '0', '--setParameter', 'noSuchParameter=1']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /noSuchParameter/);
  const value = await runProgram(haloclineBinary(), ['store', '--port', '0', '--setParameter', 'ttlMonitorSleepSecs=0']);
  assert.equal(value.code, 2);
  assert.match(value.stderr, /ttlMonitorSleepSecs/);
});
