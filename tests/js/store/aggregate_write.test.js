'use strict';
// $out and $merge (issue 14): the aggregation stages that write, as mongod 7.0
// runs them. $out replaces its target atomically (the target's indexes and
// options kept, the old contents intact when the pipeline's output cannot be
// written); $merge folds each output document into its target by the `on`
// fields with every whenMatched/whenNotMatched mode; misplaced or invalid
// stages fail with mongod's codes.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { inspect } = require('node:util');
const { MongoClient } = require('mongodb');
const { startStore } = require('../lib/server');

let server;
let client;
let db;
let n = 0;
const name = (p) => `${p}_${++n}`;

before(async () => {
  server = await startStore({ replSet: 'rs0' });
  client = new MongoClient(server.uri({ replicaSet: 'rs0', directConnection: 'false' }));
  await client.connect();
  db = client.db('aggw');
});
after(async () => {
  await client?.close();
  await server?.cleanup();
});

const agg = (coll, pipeline, extra = {}) =>
  db.command({ aggregate: coll, pipeline, cursor: {}, ...extra });

async function assertFails(promise, code) {
  await assert.rejects(promise, (e) => {
    assert.equal(e.code, code, inspect(e));
    return true;
  });
}

async function contents(coll) {
  return db.collection(coll).find({}, { sort: { _id: 1 } }).toArray();
}

async function tmpCollections() {
  const all = await db.listCollections({}, { nameOnly: true }).toArray();
  return all.map((c) => c.name).filter((c) => c.startsWith('tmp.agg_out'));
}

// ------------------------------------------------------------------ $out

test('$out replaces the target with the output, keeping its indexes and validator', async () => {
  const src = name('src');
  const dst = name('dst');
  await db.collection(src).insertMany([
    { _id: 1, k: 'a', v: 10 }, { _id: 2, k: 'b', v: 20 }, { _id: 3, k: 'c', v: 30 },
  ]);
  await db.createCollection(dst, { validator: { v: { $type: 'number' } } });
  await db.collection(dst).createIndex({ k: 1 }, { unique: true, name: 'k_unique' });
  await db.collection(dst).insertOne({ _id: 99, k: 'old', v: 0 });

  const reply = await agg(src, [{ $match: { v: { $gte: 20 } } }, { $set: { doubled: { $multiply: ['$v', 2] } } }, { $out: dst }]);
  assert.deepEqual(reply.cursor.firstBatch, []);
  assert.equal(Number(reply.cursor.id), 0);
  assert.deepEqual(await contents(dst), [
    { _id: 2, k: 'b', v: 20, doubled: 40 }, { _id: 3, k: 'c', v: 30, doubled: 60 },
  ]);
  const indexes = await db.collection(dst).listIndexes().toArray();
  assert.deepEqual(indexes.map((i) => [i.name, !!i.unique]).sort(), [['_id_', false], ['k_unique', true]]);
  const [info] = await db.listCollections({ name: dst }).toArray();
  assert.deepEqual(info.options.validator, { v: { $type: 'number' } });
  // The validator still holds on the replaced collection.
  await assertFails(db.collection(dst).insertOne({ _id: 7, k: 'z', v: 'text' }), 121);
  assert.deepEqual(await tmpCollections(), []);
});

test('$out creates a missing target (also empty, also in another database), generating _id where missing', async () => {
  const src = name('src');
  await db.collection(src).insertMany([{ _id: 1, x: 1 }, { _id: 2, x: 2 }]);
  const dst = name('dst');
  await agg(src, [{ $project: { _id: 0, x: 1 } }, { $out: dst }]);
  const out = await contents(dst);
  assert.equal(out.length, 2);
  for (const d of out) assert.equal(d._id._bsontype, 'ObjectId');
  assert.deepEqual(out.map((d) => d.x).sort(), [1, 2]);

  const empty = name('empty');
  await agg(src, [{ $match: { x: 100 } }, { $out: empty }]);
  assert.equal((await db.listCollections({ name: empty }).toArray()).length, 1);
  assert.equal(await db.collection(empty).countDocuments(), 0);

  const other = client.db('aggw_other');
  await agg(src, [{ $out: { db: 'aggw_other', coll: 'copy' } }]);
  assert.deepEqual(await other.collection('copy').find().sort({ _id: 1 }).toArray(), [{ _id: 1, x: 1 }, { _id: 2, x: 2 }]);
  await other.dropDatabase();
});

test('$out that cannot write its output leaves the target as it was and no temporary collection', async () => {
  const src = name('src');
  const dst = name('dst');
  await db.collection(src).insertMany([{ _id: 1 }, { _id: 2 }]);
  await db.collection(dst).insertOne({ _id: 'kept' });
  // Two output documents with the same _id.
  await assertFails(agg(src, [{ $project: { _id: { $literal: 'same' } } }, { $out: dst }]), 11000);
  assert.deepEqual(await contents(dst), [{ _id: 'kept' }]);
  // A document the target's validator refuses (and passes with bypassDocumentValidation).
  await db.command({ collMod: dst, validator: { ok: true } });
  await assertFails(agg(src, [{ $out: dst }]), 121);
  assert.deepEqual(await contents(dst), [{ _id: 'kept' }]);
  await agg(src, [{ $out: dst }], { bypassDocumentValidation: true });
  assert.deepEqual(await contents(dst), [{ _id: 1 }, { _id: 2 }]);
  assert.deepEqual(await tmpCollections(), []);
});

test('$out writes outputs larger than one internal batch', async () => {
  const src = name('src');
  const docs = Array.from({ length: 2500 }, (_, i) => ({ _id: i, pad: 'x'.repeat(100) }));
  await db.collection(src).insertMany(docs);
  const dst = name('dst');
  await agg(src, [{ $out: dst }]);
  assert.equal(await db.collection(dst).countDocuments(), 2500);
  // $out over its own source: reads the old contents, replaces them.
  await agg(src, [{ $match: { _id: { $lt: 10 } } }, { $out: src }]);
  assert.equal(await db.collection(src).countDocuments(), 10);
});

test('$out and $merge are refused where mongod refuses them', async () => {
  const src = name('src');
  await db.collection(src).insertOne({ _id: 1 });
  await assertFails(agg(src, [{ $out: 'x' }, { $match: {} }]), 40601);
  await assertFails(agg(src, [{ $merge: 'x' }, { $match: {} }]), 40601);
  await assertFails(agg(src, [{ $facet: { a: [{ $out: 'x' }] } }]), 40600);
  await assertFails(agg(src, [{ $out: 'system.views' }]), 17385);
  await assertFails(agg(src, [{ $out: { db: 'admin', coll: 'x' } }]), 31321);
  await assertFails(agg(src, [{ $merge: { into: { db: 'local', coll: 'x' } } }]), 31320);
  await assertFails(agg(src, [{ $out: 5 }]), 16990);
  await assertFails(agg(src, [{ $out: { coll: 'x' } }]), 40414);
  await assertFails(agg(src, [{ $out: 'x' }], { readConcern: { level: 'linearizable' } }), 72);
  await assertFails(agg(src, [{ $merge: { into: 'x', whenMatched: 'fail', whenNotMatched: 'discard' } }]), 51181);
  await assertFails(agg(src, [{ $merge: { into: 'x', whenMatched: 'replace', let: { a: 1 } } }]), 51199);
  await assertFails(agg(src, [{ $merge: { into: 'x', whenMatched: 'sometimes' } }]), 2);
  await assertFails(agg(src, [{ $merge: { into: 'x', bogus: 1 } }]), 40415);
  await assertFails(agg(src, [{ $merge: { whenMatched: 'merge' } }]), 40414);
  await assertFails(agg(src, [{ $merge: { into: 'x', on: [] } }]), 51187);
  await assertFails(agg(src, [{ $merge: { into: 'x', on: ['a', 'a'] } }]), 31465);
  await assertFails(agg(src, [{ $merge: { into: 'x', on: 'a' } }]), 51183);
  // Inside a transaction.
  const session = client.startSession();
  try {
    session.startTransaction();
    await assertFails(db.command({ aggregate: src, pipeline: [{ $out: 'x' }], cursor: {} }, { session }), 263);
    await session.abortTransaction();
  } finally {
    await session.endSession();
  }
  // Nothing was created by the refused stages.
  assert.equal((await db.listCollections({ name: 'x' }).toArray()).length, 0);
});

// ------------------------------------------------------------------ $merge

async function mergeFixture() {
  const src = name('src');
  const dst = name('dst');
  await db.collection(dst).insertMany([{ _id: 1, a: 1, keep: 'yes' }, { _id: 2, a: 2, keep: 'yes' }]);
  await db.collection(src).insertMany([{ _id: 2, a: 20, b: 'new' }, { _id: 3, a: 30, b: 'new' }]);
  return { src, dst };
}

test('$merge modes: merge, replace, keepExisting, fail; insert, discard, fail', async () => {
  let { src, dst } = await mergeFixture();
  await agg(src, [{ $merge: dst }]); // whenMatched merge, whenNotMatched insert
  assert.deepEqual(await contents(dst), [
    { _id: 1, a: 1, keep: 'yes' }, { _id: 2, a: 20, keep: 'yes', b: 'new' }, { _id: 3, a: 30, b: 'new' },
  ]);

  ({ src, dst } = await mergeFixture());
  await agg(src, [{ $merge: { into: dst, whenMatched: 'replace', whenNotMatched: 'discard' } }]);
  assert.deepEqual(await contents(dst), [{ _id: 1, a: 1, keep: 'yes' }, { _id: 2, a: 20, b: 'new' }]);

  ({ src, dst } = await mergeFixture());
  await agg(src, [{ $merge: { into: dst, whenMatched: 'keepExisting' } }]);
  assert.deepEqual(await contents(dst), [
    { _id: 1, a: 1, keep: 'yes' }, { _id: 2, a: 2, keep: 'yes' }, { _id: 3, a: 30, b: 'new' },
  ]);

  ({ src, dst } = await mergeFixture());
  await assertFails(agg(src, [{ $merge: { into: dst, whenMatched: 'fail' } }]), 11000);
  await agg(src, [{ $match: { _id: 3 } }, { $merge: { into: dst, whenMatched: 'fail' } }]);
  assert.equal(await db.collection(dst).countDocuments(), 3);

  ({ src, dst } = await mergeFixture());
  await assertFails(agg(src, [{ $merge: { into: dst, whenMatched: 'merge', whenNotMatched: 'fail' } }]), 13113);
  await agg(src, [{ $match: { _id: 2 } }, { $merge: { into: dst, whenMatched: 'merge', whenNotMatched: 'fail' } }]);
  assert.deepEqual((await contents(dst))[1], { _id: 2, a: 20, keep: 'yes', b: 'new' });
});

test('$merge with a whenMatched pipeline sees $$new and its let variables; a miss inserts the source document', async () => {
  const { src, dst } = await mergeFixture();
  await agg(src, [{
    $merge: {
      into: dst,
      let: { incoming: '$a', tag: { $concat: ['from-', '$b'] } },
      whenMatched: [{ $set: { a: { $add: ['$a', '$$incoming'] }, tag: '$$tag', seen: '$$new.b' } }],
      whenNotMatched: 'insert',
    },
  }]);
  assert.deepEqual(await contents(dst), [
    { _id: 1, a: 1, keep: 'yes' },
    { _id: 2, a: 22, keep: 'yes', tag: 'from-new', seen: 'new' },
    { _id: 3, a: 30, b: 'new' },
  ]);
});

test('$merge on other fields needs a unique index on them, matches by them and checks their values', async () => {
  const src = name('src');
  const dst = name('dst');
  await db.collection(dst).createIndex({ sku: 1, region: 1 }, { unique: true });
  await db.collection(dst).insertOne({ _id: 'x', sku: 'A', region: 'eu', qty: 1 });
  await db.collection(src).insertMany([
    { sku: 'A', region: 'eu', qty: 5 }, { sku: 'A', region: 'us', qty: 7 },
  ]);
  await agg(src, [{ $project: { _id: 0 } }, { $merge: { into: dst, on: ['region', 'sku'] } }]);
  const out = await db.collection(dst).find({}, { projection: { _id: 0 } }).sort({ region: 1 }).toArray();
  assert.deepEqual(out, [{ sku: 'A', region: 'eu', qty: 5 }, { sku: 'A', region: 'us', qty: 7 }]);
  assert.equal((await db.collection(dst).findOne({ region: 'eu' }))._id, 'x');

  await db.collection(src).insertOne({ sku: 'B' });
  await assertFails(agg(src, [{ $match: { sku: 'B' } }, { $project: { _id: 0 } }, { $merge: { into: dst, on: ['region', 'sku'] } }]), 51132);
  await db.collection(src).insertOne({ sku: 'C', region: ['eu'] });
  await assertFails(agg(src, [{ $match: { sku: 'C' } }, { $project: { _id: 0 } }, { $merge: { into: dst, on: ['region', 'sku'] } }]), 51185);
});

test('$merge into another database, and its writes seen by a change stream', async () => {
  const src = name('src');
  await db.collection(src).insertMany([{ _id: 1, v: 1 }, { _id: 2, v: 2 }]);
  const other = client.db('aggw_other2');
  await other.collection('t').insertOne({ _id: 1, v: 0, w: 'kept' });
  const stream = other.collection('t').watch();
  await stream.tryNext(); // the stream is open before the writes
  await agg(src, [{ $merge: { into: { db: 'aggw_other2', coll: 't' } } }]);
  const events = [];
  while (events.length < 2) {
    const ev = await stream.next();
    events.push([ev.operationType, ev.documentKey._id]);
  }
  assert.deepEqual(events, [['update', 1], ['insert', 2]]);
  await stream.close();
  assert.deepEqual(await other.collection('t').find().sort({ _id: 1 }).toArray(), [{ _id: 1, v: 1, w: 'kept' }, { _id: 2, v: 2 }]);
  await other.dropDatabase();
});

// ------------------------------------------------------------------ $listLocalSessions

test('$listLocalSessions lists the sessions in use, and a database-level aggregate can $out them', async () => {
  const session = client.startSession();
  try {
    await db.collection(name('s')).insertOne({ x: 1 }, { session });
    const id = session.id.id;
    const all = await db.aggregate([{ $listLocalSessions: {} }]).toArray();
    const mine = all.find((s) => Buffer.compare(s._id.id.buffer, id.buffer) === 0);
    assert.ok(mine, inspect(all));
    assert.ok(mine.lastUse instanceof Date);
    assert.ok(Math.abs(Date.now() - mine.lastUse.getTime()) < 600000, inspect(mine));
    assert.equal(mine._id.uid.buffer.length, 32);
    assert.deepEqual(await db.aggregate([{ $listLocalSessions: { users: [{ user: 'nobody', db: 'x' }] } }]).toArray(), []);
    assert.ok((await db.aggregate([{ $listLocalSessions: { allUsers: true } }]).toArray()).length >= 1);
    await assertFails(db.aggregate([{ $listLocalSessions: { bogus: 1 } }]).toArray(), 40415);
    await assertFails(db.collection('c').aggregate([{ $listLocalSessions: {} }]).toArray(), 73);
    await assertFails(db.collection('c').aggregate([{ $match: {} }, { $listLocalSessions: {} }]).toArray(), 40602);

    const dst = name('sessions');
    await db.aggregate([{ $listLocalSessions: {} }, { $limit: 1 }, { $project: { _id: 1 } }, { $out: dst }]).toArray();
    assert.equal(await db.collection(dst).countDocuments(), 1);
  } finally {
    await session.endSession();
  }
});
