'use strict';
// Views (issue 14): create with viewOn/pipeline, read-only, read through find,
// aggregate, count and distinct as on mongod 7.0 (views over views, a view's
// default collation, cursors that outlive a batch), listed by listCollections,
// changed by collMod, removed by drop, durable across a kill -9; writes, indexes
// and change streams on a view fail with mongod's codes.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { inspect } = require('node:util');
const { MongoClient } = require('mongodb');
const { startStore } = require('../lib/server');

let server;
let client;
let db;

before(async () => {
  server = await startStore({ replSet: 'rs0' });
  client = new MongoClient(server.uri({ replicaSet: 'rs0', directConnection: 'false' }));
  await client.connect();
  db = client.db('views');
  await db.collection('people').insertMany([
    { _id: 1, name: 'ann', age: 31, city: 'Oslo', tags: ['a', 'b'], secret: 's1' },
    { _id: 2, name: 'Bob', age: 17, city: 'oslo', tags: ['b'], secret: 's2' },
    { _id: 3, name: 'cid', age: 45, city: 'Rome', tags: [], secret: 's3' },
    { _id: 4, name: 'dee', age: 52, city: 'Rome', tags: ['c', 'a'], secret: 's4' },
    { _id: 5, name: 'eve', age: 23, city: null, secret: 's5' },
  ]);
  await db.createCollection('adults', {
    viewOn: 'people',
    pipeline: [{ $match: { age: { $gte: 18 } } }, { $project: { secret: 0 } }],
  });
});
after(async () => {
  await client?.close();
  await server?.cleanup();
});

async function assertFails(promise, code) {
  await assert.rejects(promise, (e) => {
    assert.equal(e.code, code, inspect(e));
    return true;
  });
}

test('a view reads through find, aggregate, count and distinct', async () => {
  const adults = db.collection('adults');
  assert.deepEqual(await adults.find({ city: 'Rome' }, { sort: { age: -1 } }).toArray(), [
    { _id: 4, name: 'dee', age: 52, city: 'Rome', tags: ['c', 'a'] },
    { _id: 3, name: 'cid', age: 45, city: 'Rome', tags: [] },
  ]);
  assert.deepEqual(await adults.find({}, { sort: { _id: 1 }, skip: 1, limit: 2, projection: { name: 1, _id: 0 } }).toArray(),
    [{ name: 'cid' }, { name: 'dee' }]);
  assert.deepEqual(await adults.findOne({ _id: 2 }), null);
  assert.deepEqual(await adults.findOne({ _id: 1 }), { _id: 1, name: 'ann', age: 31, city: 'Oslo', tags: ['a', 'b'] });
  assert.deepEqual(await adults.aggregate([{ $group: { _id: '$city', n: { $sum: 1 } } }, { $sort: { _id: 1 } }]).toArray(),
    [{ _id: null, n: 1 }, { _id: 'Oslo', n: 1 }, { _id: 'Rome', n: 2 }]);
  assert.equal(await adults.countDocuments({ city: 'Rome' }), 2);
  assert.equal(await adults.estimatedDocumentCount(), 4);
  assert.deepEqual((await adults.distinct('tags')).sort(), ['a', 'b', 'c']);
  assert.deepEqual((await adults.distinct('city', { age: { $lt: 40 } })).sort(), ['Oslo', null]);
  // A cursor over a view survives its first batch (getMore on the view's namespace).
  const names = [];
  for await (const d of adults.find({}, { batchSize: 1, sort: { _id: 1 } })) names.push(d.name);
  assert.deepEqual(names, ['ann', 'cid', 'dee', 'eve']);
});

test('views over views, a view default collation, and listCollections', async () => {
  await db.createCollection('romans', { viewOn: 'adults', pipeline: [{ $match: { city: 'Rome' } }] });
  assert.deepEqual((await db.collection('romans').find().sort({ _id: 1 }).toArray()).map((d) => d._id), [3, 4]);
  await db.createCollection('byName', {
    viewOn: 'people', pipeline: [{ $sort: { name: 1 } }, { $project: { name: 1 } }],
    collation: { locale: 'en', strength: 2 },
  });
  // The view sorts with its own case-insensitive collation: Bob between ann and cid.
  assert.deepEqual((await db.collection('byName').find().toArray()).map((d) => d.name), ['ann', 'Bob', 'cid', 'dee', 'eve']);
  assert.equal(await db.collection('byName').countDocuments({ name: 'BOB' }), 1);

  const infos = await db.listCollections({ type: 'view' }).toArray();
  const byName = Object.fromEntries(infos.map((i) => [i.name, i]));
  assert.deepEqual(Object.keys(byName).sort(), ['adults', 'byName', 'romans']);
  assert.deepEqual(byName.romans.options, { viewOn: 'adults', pipeline: [{ $match: { city: 'Rome' } }] });
  assert.equal(byName.romans.info.readOnly, true);
  assert.equal(byName.byName.options.collation.locale, 'en');
  const names = (await db.listCollections({}, { nameOnly: true }).toArray()).map((i) => i.name);
  assert.ok(names.includes('system.views') && names.includes('people'), inspect(names));
});

test('writes, indexes and change streams on a view fail with CommandNotSupportedOnView', async () => {
  const adults = db.collection('adults');
  await assertFails(adults.insertOne({ _id: 9 }), 166);
  await assertFails(adults.updateOne({ _id: 1 }, { $set: { a: 1 } }), 166);
  await assertFails(adults.updateOne({ _id: 99 }, { $set: { a: 1 } }, { upsert: true }), 166);
  await assertFails(adults.deleteOne({ _id: 1 }), 166);
  await assertFails(adults.findOneAndUpdate({ _id: 1 }, { $set: { a: 1 } }), 166);
  await assertFails(adults.createIndex({ name: 1 }), 166);
  await assertFails(adults.listIndexes().toArray(), 166);
  await assertFails(adults.watch().tryNext(), 166);
  // The source is untouched, and the view is still a view.
  assert.equal(await db.collection('people').countDocuments(), 5);
  assert.equal((await db.listCollections({ name: 'adults' }).toArray())[0].type, 'view');
});

test('create and collMod refuse what mongod refuses; collMod and drop change and remove a view', async () => {
  await assertFails(db.createCollection('adults', { viewOn: 'people' }), 48);
  await assertFails(db.createCollection('people', { viewOn: 'adults' }), 48);
  await assertFails(db.command({ create: 'adults' }), 48);
  await assertFails(db.createCollection('bad1', { viewOn: 'people', pipeline: [{ $out: 'x' }] }), 157);
  await assertFails(db.createCollection('bad2', { viewOn: 'people', capped: true, size: 1000 }), 72);
  await assertFails(db.createCollection('bad3', { viewOn: 'people', pipeline: [{ $bogus: 1 }] }), 40324);
  await assertFails(db.command({ create: 'bad4', pipeline: [] }), 72);
  await assertFails(db.command({ create: 'bad5', viewOn: 5 }), 14);
  // A chain that loops back.
  await db.createCollection('loopA', { viewOn: 'people' });
  await db.createCollection('loopB', { viewOn: 'loopA' });
  await assertFails(db.command({ collMod: 'loopA', viewOn: 'loopB', pipeline: [] }), 93);
  await assertFails(db.command({ collMod: 'loopA', validator: { a: 1 } }), 72);

  await db.command({ collMod: 'loopB', viewOn: 'people', pipeline: [{ $match: { _id: 2 } }] });
  assert.deepEqual((await db.collection('loopB').find().toArray()).map((d) => d._id), [2]);
  assert.equal(await db.collection('loopB').drop(), true);
  assert.equal((await db.listCollections({ name: 'loopB' }).toArray()).length, 0);
  await assertFails(db.command({ collMod: 'people', viewOn: 'loopA' }), 72);
  // Once dropped, the name is free for a collection.
  await db.collection('loopB').insertOne({ _id: 'now a collection' });
  assert.equal((await db.listCollections({ name: 'loopB' }).toArray())[0].type, 'collection');
});

test('creating a view is a create event with its definition for showExpandedEvents streams only', async () => {
  const expanded = db.watch([], { showExpandedEvents: true });
  const plain = db.watch([]);
  await expanded.tryNext(); // both open before the create
  await plain.tryNext();
  await db.createCollection('minors', { viewOn: 'people', pipeline: [{ $match: { age: { $lt: 18 } } }] });
  await db.collection('people').insertOne({ _id: 6, name: 'fay', age: 9 }); // a marker after it
  const ev = await expanded.next();
  assert.equal(ev.operationType, 'create');
  assert.deepEqual(ev.ns, { db: 'views', coll: 'minors' });
  assert.deepEqual(ev.operationDescription, { viewOn: 'people', pipeline: [{ $match: { age: { $lt: 18 } } }] });
  assert.equal(ev.collectionUUID, undefined, 'a view has no collection UUID');
  const first = await plain.next();
  assert.equal(first.operationType, 'insert', 'a stream without showExpandedEvents sees no create event');
  await expanded.close();
  await plain.close();
  await db.collection('people').deleteOne({ _id: 6 });
  await db.dropCollection('minors');
});

test('views survive kill -9 of the store', async () => {
  const own = await startStore({ replSet: 'rs0' });
  try {
    let c = new MongoClient(own.uri({ replicaSet: 'rs0', directConnection: 'false' }));
    await c.connect();
    await c.db('d').collection('src').insertMany([{ _id: 1, v: 1 }, { _id: 2, v: 2 }]);
    await c.db('d').createCollection('big', { viewOn: 'src', pipeline: [{ $match: { v: { $gt: 1 } } }] });
    await c.close();
    await own.kill();
    await own.start();
    c = new MongoClient(own.uri({ replicaSet: 'rs0', directConnection: 'false' }));
    await c.connect();
    assert.deepEqual(await c.db('d').collection('big').find().toArray(), [{ _id: 2, v: 2 }]);
    await c.close();
  } finally {
    await own.cleanup();
  }
});
