'use strict';
// Change streams on a single-member replica set, through the Node driver: every
// event type, every fullDocument mode, resume tokens, awaitData latency, and
// automatic resume across a kill -9 of the store.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const { startStore } = require('../lib/server');
const { expectServerError } = require('../lib/fixture');

let server;
let client;
let n = 0;
const collName = () => `cs_${++n}_${process.pid}`;

before(async () => {
  server = await startStore({ replSet: 'rs0' });
  client = new MongoClient(server.uri({ replicaSet: 'rs0', directConnection: 'false' }), { serverSelectionTimeoutMS: 10000 });
  await client.connect();
});
after(async () => {
  await client.close();
  await server.cleanup();
});

async function nextEvents(stream, count) {
  const out = [];
  while (out.length < count) out.push(await stream.next());
  return out;
}

test('insert, update, replace and delete events with documentKey and updateDescription', async () => {
  const coll = client.db('cs').collection(collName());
  await coll.insertOne({ _id: 0 });
  const stream = coll.watch();
  await stream.tryNext(); // opens the cursor before the writes
  await coll.insertOne({ _id: 1, a: 1, b: { c: 1 }, arr: [1, 2, 3] });
  await coll.updateOne({ _id: 1 }, { $set: { a: 2, 'b.c': 5 }, $unset: { z: 1 } });
  await coll.updateOne({ _id: 1 }, { $unset: { a: 1 } });
  await coll.updateOne({ _id: 1 }, { $pop: { arr: 1 } });
  await coll.replaceOne({ _id: 1 }, { x: 1 });
  await coll.deleteOne({ _id: 1 });
  const [ins, upd, unset, pop, rep, del] = await nextEvents(stream, 6);
  assert.equal(ins.operationType, 'insert');
  assert.deepEqual(ins.fullDocument, { _id: 1, a: 1, b: { c: 1 }, arr: [1, 2, 3] });
  assert.deepEqual(ins.documentKey, { _id: 1 });
  assert.deepEqual(ins.ns, { db: 'cs', coll: coll.collectionName });
  assert.ok(ins.clusterTime && ins.wallTime instanceof Date);
  assert.equal(upd.operationType, 'update');
  assert.deepEqual(upd.updateDescription.updatedFields, { a: 2, 'b.c': 5 });
  assert.deepEqual(upd.updateDescription.removedFields, []);
  assert.equal(upd.fullDocument, undefined);
  assert.deepEqual(unset.updateDescription.removedFields, ['a']);
  assert.deepEqual(pop.updateDescription.truncatedArrays, [{ field: 'arr', newSize: 2 }]);
  assert.equal(rep.operationType, 'replace');
  assert.deepEqual(rep.fullDocument, { _id: 1, x: 1 });
  assert.equal(del.operationType, 'delete');
  assert.deepEqual(del.documentKey, { _id: 1 });
  await stream.close();
});

test('array changes are described by index as mongod does: a changed element, appended ones, a shrink; the whole array when that is shorter', async () => {
  const coll = client.db('cs').collection(collName());
  await coll.insertOne({ _id: 1, arr: [1, 2, 3], docs: [{ x: 1, '1': 1, pad: 'p'.repeat(64) }], w: [1, 2, 3, 4, 5, 6] });
  const stream = coll.watch([], { showExpandedEvents: true });
  await stream.tryNext(); // opens the cursor before the writes
  await coll.updateOne({ _id: 1 }, { $set: { 'arr.1': 9 } });
  await coll.updateOne({ _id: 1 }, { $push: { arr: 4 } });
  await coll.updateOne({ _id: 1 }, { $set: { 'docs.0.x': 2, 'docs.0.1': 2 } });
  await coll.updateOne({ _id: 1 }, { $pop: { arr: 1 } });
  await coll.updateOne({ _id: 1 }, { $pull: { w: 1 } });
  const [set, push, inner, pop, pull] = await nextEvents(stream, 5);
  assert.deepEqual(set.updateDescription.updatedFields, { 'arr.1': 9 });
  assert.deepEqual(push.updateDescription.updatedFields, { 'arr.3': 4 });
  assert.deepEqual(inner.updateDescription.updatedFields, { 'docs.0.x': 2, 'docs.0.1': 2 });
  // Only the numeric field name makes a path ambiguous; the index is an int.
  assert.deepEqual(inner.updateDescription.disambiguatedPaths, { 'docs.0.1': ['docs', 0, '1'] });
  assert.deepEqual(pop.updateDescription.updatedFields, {});
  assert.deepEqual(pop.updateDescription.truncatedArrays, [{ field: 'arr', newSize: 3 }]);
  // Every element moved: the new array is shorter than the moves.
  assert.deepEqual(pull.updateDescription.updatedFields, { w: [2, 3, 4, 5, 6] });
  assert.deepEqual(pull.updateDescription.truncatedArrays, []);
  await stream.close();
});

test('fullDocument modes: updateLookup, whenAvailable and required', async () => {
  const db = client.db('cs');
  const name = collName();
  await db.createCollection(name, { changeStreamPreAndPostImages: { enabled: true } });
  const coll = db.collection(name);
  const lookup = coll.watch([], { fullDocument: 'updateLookup' });
  const post = coll.watch([], { fullDocument: 'whenAvailable', fullDocumentBeforeChange: 'whenAvailable' });
  const req = coll.watch([], { fullDocument: 'required' });
  for (const s of [lookup, post, req]) await s.tryNext();
  await coll.insertOne({ _id: 1, v: 1 });
  await coll.updateOne({ _id: 1 }, { $inc: { v: 1 } });
  await coll.updateOne({ _id: 1 }, { $inc: { v: 10 } });
  const [, l1] = await nextEvents(lookup, 2);
  assert.ok([2, 12].includes(l1.fullDocument.v), 'updateLookup returns the current document');
  const [, p1, p2] = await nextEvents(post, 3);
  assert.deepEqual(p1.fullDocument, { _id: 1, v: 2 }, 'post-image as of the update');
  assert.deepEqual(p1.fullDocumentBeforeChange, { _id: 1, v: 1 });
  assert.deepEqual(p2.fullDocument, { _id: 1, v: 12 });
  const [, r1] = await nextEvents(req, 2);
  assert.deepEqual(r1.fullDocument, { _id: 1, v: 2 });
  for (const s of [lookup, post, req]) await s.close();

  // Without recorded images, 'required' fails instead of returning nothing.
  const plain = db.collection(collName());
  await plain.insertOne({ _id: 1 });
  const strict = plain.watch([], { fullDocument: 'required' });
  await strict.tryNext();
  await plain.updateOne({ _id: 1 }, { $set: { a: 1 } });
  await expectServerError(strict.next(), 47);
  await strict.close().catch(() => {});
});

test('drop, rename and dropDatabase events; invalidate closes a collection stream', async () => {
  const db = client.db(`csdb_${process.pid}`);
  const a = db.collection('a');
  await a.insertOne({ _id: 1 });
  const dbStream = db.watch();
  const collStream = a.watch();
  await dbStream.tryNext();
  await collStream.tryNext();
  await a.rename('b');
  await db.collection('b').drop();
  await db.dropDatabase();
  const [ren, inv] = await nextEvents(collStream, 2);
  assert.equal(ren.operationType, 'rename');
  assert.deepEqual(ren.to, { db: db.databaseName, coll: 'b' });
  assert.equal(inv.operationType, 'invalidate');
  const [r2, d2, dd, inv2] = await nextEvents(dbStream, 4);
  assert.deepEqual([r2.operationType, d2.operationType, dd.operationType, inv2.operationType],
    ['rename', 'drop', 'dropDatabase', 'invalidate']);
  await dbStream.close();
  await collStream.close();
});

test('with showExpandedEvents a rename describes its target and the collection it replaced', async () => {
  const db = client.db(`csx_${process.pid}`);
  const a = db.collection('a');
  await a.insertOne({ _id: 1 });
  await db.collection('b').insertOne({ _id: 2 });
  const bUuid = (await db.listCollections({ name: 'b' }).toArray())[0].info.uuid;
  const stream = a.watch([], { showExpandedEvents: true });
  await stream.tryNext();
  await a.rename('b', { dropTarget: true });
  await db.collection('b').rename('c');
  const [ren] = await nextEvents(stream, 1);
  assert.equal(ren.operationType, 'rename');
  assert.deepEqual(ren.operationDescription.to, { db: db.databaseName, coll: 'b' });
  assert.equal(ren.operationDescription.dropTarget.toHexString(), bUuid.toHexString());
  await stream.close();
  // A rename that replaces nothing has no dropTarget.
  const dbStream = db.watch([], { showExpandedEvents: true });
  await dbStream.tryNext();
  await db.collection('c').rename('d');
  const [plain] = await nextEvents(dbStream, 1);
  assert.equal(plain.operationType, 'rename');
  assert.deepEqual(plain.operationDescription, { to: { db: db.databaseName, coll: 'd' } });
  await dbStream.close();
  await db.dropDatabase();
});

test('with showExpandedEvents an update names the real fields of a path with a numeric field name', async () => {
  const coll = client.db('cs').collection(collName());
  await coll.insertOne({ _id: 1, a: { 1: 1 }, b: 1 });
  const expanded = coll.watch([], { showExpandedEvents: true });
  const plain = coll.watch();
  await expanded.tryNext();
  await plain.tryNext();
  await coll.updateOne({ _id: 1 }, { $set: { 'a.1': 2 } });
  await coll.updateOne({ _id: 1 }, { $set: { b: 2 } });
  const [amb, clear] = await nextEvents(expanded, 2);
  assert.deepEqual(amb.updateDescription.updatedFields, { 'a.1': 2 });
  assert.deepEqual(amb.updateDescription.disambiguatedPaths, { 'a.1': ['a', '1'] });
  assert.deepEqual(clear.updateDescription.disambiguatedPaths, {});
  const [p] = await nextEvents(plain, 1);
  assert.equal(p.updateDescription.disambiguatedPaths, undefined, 'only with showExpandedEvents');
  await expanded.close();
  await plain.close();
});

test('resumeAfter, startAfter and startAtOperationTime replay exactly the later events', async () => {
  const coll = client.db('cs').collection(collName());
  const stream = coll.watch();
  await stream.tryNext();
  const session = client.startSession();
  await coll.insertOne({ _id: 1 }, { session });
  const opTime = session.operationTime;
  await coll.insertMany([{ _id: 2 }, { _id: 3 }, { _id: 4 }]);
  const [e1, e2] = await nextEvents(stream, 2);
  await stream.close();
  await session.endSession();

  const ids = async (s, k) => (await nextEvents(s, k)).map((e) => e.documentKey._id);
  const resumed = coll.watch([], { resumeAfter: e2._id });
  assert.deepEqual(await ids(resumed, 2), [3, 4]);
  await resumed.close();
  const started = coll.watch([], { startAfter: e1._id });
  assert.deepEqual(await ids(started, 3), [2, 3, 4]);
  await started.close();
  const atTime = coll.watch([], { startAtOperationTime: opTime });
  assert.deepEqual(await ids(atTime, 4), [1, 2, 3, 4]);
  await atTime.close();
});

test('a waiting getMore returns as soon as an event arrives, not at maxAwaitTimeMS', async () => {
  const coll = client.db('cs').collection(collName());
  const stream = coll.watch([], { maxAwaitTimeMS: 8000 });
  await stream.tryNext();
  const waiting = stream.next();
  const t0 = Date.now();
  await coll.insertOne({ _id: 'now' });
  const ev = await waiting;
  const latency = Date.now() - t0;
  assert.equal(ev.documentKey._id, 'now');
  assert.ok(latency < 4000, `event delivered after ${latency} ms; it must not wait for maxAwaitTimeMS (8000 ms)`);
  await stream.close();
});

test('$match and $project after $changeStream; bad options and standalone errors', async () => {
  const coll = client.db('cs').collection(collName());
  const stream = coll.watch([{ $match: { operationType: 'delete' } }, { $project: { documentKey: 1 } }]);
  await stream.tryNext();
  await coll.insertOne({ _id: 1 });
  await coll.deleteOne({ _id: 1 });
  const ev = await stream.next();
  assert.deepEqual(ev.documentKey, { _id: 1 });
  assert.equal(ev.operationType, undefined);
  await stream.close();
  const bad = coll.watch([], { fullDocument: 'nope' });
  await expectServerError(bad.next(), 2);
  await bad.close().catch(() => {});
  const lost = coll.watch([], { resumeAfter: { _data: 'garbage' } });
  await expectServerError(lost.next(), 260);
  await lost.close().catch(() => {});
});

test('the driver resumes a change stream across kill -9 of the store without losing events', async () => {
  const coll = client.db('cs').collection(collName());
  const stream = coll.watch();
  await stream.tryNext();
  await coll.insertMany([{ _id: 1 }, { _id: 2 }]);
  const before = await nextEvents(stream, 2);
  assert.deepEqual(before.map((e) => e.documentKey._id), [1, 2]);
  await server.kill();
  await server.restart({ samePort: true });
  // Writes acknowledged after the restart, then the stream resumes by itself.
  const writer = new MongoClient(server.uri({ replicaSet: 'rs0', directConnection: 'false' }));
  await writer.connect();
  await writer.db('cs').collection(coll.collectionName).insertMany([{ _id: 3 }, { _id: 4 }]);
  await writer.close();
  const afterEvents = await nextEvents(stream, 2);
  assert.deepEqual(afterEvents.map((e) => e.documentKey._id), [3, 4], 'no event lost or repeated');
  await stream.close();
});

test('change streams need a replica set', async () => {
  const standalone = await startStore();
  const c = new MongoClient(standalone.uri());
  await c.connect();
  try {
    const s = c.db('x').collection('y').watch();
    await expectServerError(s.next(), 40573);
    await s.close().catch(() => {});
  } finally {
    await c.close();
    await standalone.cleanup();
  }
});

test('readConcern afterClusterTime waits for (and sees) the given cluster time', async () => {
  const coll = client.db('cs').collection(collName());
  const session = client.startSession({ causalConsistency: true });
  await coll.insertOne({ _id: 'causal' }, { session });
  // The driver sends afterClusterTime = the insert's operationTime.
  assert.deepEqual(await coll.findOne({ _id: 'causal' }, { session }), { _id: 'causal' });
  await session.endSession();
  const db = client.db('cs');
  const future = await db.command({ find: coll.collectionName, readConcern: { level: 'majority', afterClusterTime: new (require('mongodb').Timestamp)({ t: Math.floor(Date.now() / 1000) + 5, i: 1 }) } });
  assert.equal(future.ok, 1, 'a cluster time ahead of ours moves the clock instead of hanging');
  await expectServerError(db.command({ find: coll.collectionName, readConcern: { level: 'bogus' } }), 9);
});

test('resuming from a point the capped oplog no longer holds fails with ChangeStreamHistoryLost', async () => {
  const small = await startStore({ replSet: 'rs0', extraArgs: ['--oplogSize', '1'] });
  const c = new MongoClient(small.uri({ replicaSet: 'rs0', directConnection: 'false' }));
  await c.connect();
  try {
    const coll = c.db('cs').collection('capped');
    const stream = coll.watch();
    await stream.tryNext();
    await coll.insertOne({ _id: 'first' });
    const first = await stream.next();
    await stream.close();
    // About 3 MB of writes push the first entry out of a 1 MB oplog (truncated as writes commit).
    const pad = 'x'.repeat(10_000);
    for (let i = 0; i < 30; i++) {
      await coll.insertMany(Array.from({ length: 10 }, (_, k) => ({ _id: `${i}-${k}`, pad })));
    }
    const oldest = await c.db('local').collection('oplog.rs').find().sort({ $natural: 1 }).limit(1).next();
    assert.ok(oldest.ts.comp(first.clusterTime) > 0, 'the first entry was truncated');
    const resumed = coll.watch([], { resumeAfter: first._id });
    const err = await resumed.next().then(() => null, (e) => e);
    assert.ok(err, 'resuming must fail');
    assert.equal(err.code, 286);
    await resumed.close().catch(() => {});
  } finally {
    await c.close();
    await small.cleanup();
  }
});

test('a change stream $match compares strings under the aggregate collation', async () => {
  const coll = client.db('cs').collection(collName());
  await coll.insertOne({ _id: 0 });
  const stream = coll.watch([{ $match: { 'fullDocument.name': 'ann' } }], { collation: { locale: 'en', strength: 2 } });
  await stream.tryNext(); // opens the cursor before the writes
  await coll.insertMany([{ _id: 1, name: 'bob' }, { _id: 2, name: 'ANN' }]);
  const [ev] = await nextEvents(stream, 1);
  assert.deepEqual(ev.fullDocument, { _id: 2, name: 'ANN' });
  await stream.close();
});
