'use strict';
// Secondary indexes: creation, listing, dropping, and unique/sparse/partial enforcement.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { useStore, expectServerError, countByFind } = require('../lib/fixture');

const ctx = useStore({ dbName: 'index_test' });

async function indexMap(c) {
  const list = await c.listIndexes().toArray();
  return Object.fromEntries(list.map((i) => [i.name, i]));
}

test('a new collection has only the _id_ index', async () => {
  const c = ctx.coll();
  await c.insertOne({ _id: 1 });
  const list = await c.listIndexes().toArray();
  assert.equal(list.length, 1);
  assert.equal(list[0].name, '_id_');
  assert.deepEqual(list[0].key, { _id: 1 });
  assert.equal(list[0].v, 2);
});

test('createIndex single-field and compound: names, keys, listIndexes', async () => {
  const c = ctx.coll();
  await c.insertMany([{ a: 1, b: 2 }]);
  assert.equal(await c.createIndex({ a: 1 }), 'a_1');
  assert.equal(await c.createIndex({ a: 1, b: -1 }), 'a_1_b_-1');
  assert.equal(await c.createIndex({ 'x.y': 1 }, { name: 'custom' }), 'custom');
  const idx = await indexMap(c);
  assert.deepEqual(Object.keys(idx).sort(), ['_id_', 'a_1', 'a_1_b_-1', 'custom']);
  assert.deepEqual(idx.a_1.key, { a: 1 });
  assert.deepEqual(idx['a_1_b_-1'].key, { a: 1, b: -1 });
  assert.deepEqual(Object.keys(idx['a_1_b_-1'].key), ['a', 'b'], 'key order preserved');
  assert.deepEqual(idx.custom.key, { 'x.y': 1 });
});

test('createIndexes reply counts; identical spec again is a no-op', async () => {
  const c = ctx.coll();
  await c.insertOne({ a: 1 });
  const r1 = await ctx.db.command({ createIndexes: c.collectionName, indexes: [{ key: { a: 1 }, name: 'a_1' }] });
  assert.equal(r1.ok, 1);
  assert.equal(r1.numIndexesBefore, 1);
  assert.equal(r1.numIndexesAfter, 2);
  const r2 = await ctx.db.command({ createIndexes: c.collectionName, indexes: [{ key: { a: 1 }, name: 'a_1' }] });
  assert.equal(r2.ok, 1);
  assert.equal(r2.numIndexesBefore, 2);
  assert.equal(r2.numIndexesAfter, 2);
});

test('createIndex on a missing collection creates the collection', async () => {
  const c = ctx.coll();
  const r = await ctx.db.command({ createIndexes: c.collectionName, indexes: [{ key: { z: 1 }, name: 'z_1' }] });
  assert.equal(r.createdCollectionAutomatically, true);
  const names = (await ctx.db.listCollections({}, { nameOnly: true }).toArray()).map((x) => x.name);
  assert.ok(names.includes(c.collectionName));
});

test('same keys under another name -> IndexOptionsConflict (85); same name, other keys -> 86', async () => {
  const c = ctx.coll();
  await c.createIndex({ a: 1 });
  await expectServerError(c.createIndex({ a: 1 }, { name: 'other_name' }), 85);
  await expectServerError(c.createIndex({ b: 1 }, { name: 'a_1' }), 86);
});

test('unique index rejects duplicate inserts and updates (11000)', async () => {
  const c = ctx.coll();
  await c.createIndex({ email: 1 }, { unique: true });
  const idx = await indexMap(c);
  assert.equal(idx.email_1.unique, true);
  await c.insertOne({ _id: 1, email: 'a@x' });
  await c.insertOne({ _id: 2, email: 'b@x' });
  const e1 = await expectServerError(c.insertOne({ _id: 3, email: 'a@x' }), 11000);
  assert.deepEqual(e1.keyPattern, { email: 1 });
  assert.deepEqual(e1.keyValue, { email: 'a@x' });
  assert.match(e1.message, /index: email_1 dup key/);
  await expectServerError(c.updateOne({ _id: 2 }, { $set: { email: 'a@x' } }), 11000);
  await expectServerError(c.replaceOne({ _id: 2 }, { email: 'a@x' }), 11000);
  await expectServerError(c.updateOne({ _id: 9 }, { $set: { email: 'a@x' } }, { upsert: true }), 11000);
  assert.deepEqual(await c.find({}, { sort: { _id: 1 } }).toArray(), [
    { _id: 1, email: 'a@x' },
    { _id: 2, email: 'b@x' },
  ]);
  // Freeing the key makes it usable again.
  await c.deleteOne({ _id: 1 });
  await c.insertOne({ _id: 3, email: 'a@x' });
});

test('unique index: at most one document may lack the field (null key)', async () => {
  const c = ctx.coll();
  await c.createIndex({ k: 1 }, { unique: true });
  await c.insertOne({ _id: 1 });
  await expectServerError(c.insertOne({ _id: 2 }), 11000);
  await expectServerError(c.insertOne({ _id: 3, k: null }), 11000);
});

test('unique index over array values: each element is a key', async () => {
  const c = ctx.coll();
  await c.createIndex({ tags: 1 }, { unique: true });
  await c.insertOne({ _id: 1, tags: ['a', 'b'] });
  await expectServerError(c.insertOne({ _id: 2, tags: ['c', 'b'] }), 11000);
  await c.insertOne({ _id: 3, tags: ['c', 'd'] });
  // The same value twice within one document is not a violation.
  await c.insertOne({ _id: 4, tags: ['e', 'e'] });
});

test('unique compound index considers the whole key', async () => {
  const c = ctx.coll();
  await c.createIndex({ a: 1, b: 1 }, { unique: true });
  await c.insertMany([
    { a: 1, b: 1 },
    { a: 1, b: 2 },
    { a: 2, b: 1 },
  ]);
  await expectServerError(c.insertOne({ a: 1, b: 2 }), 11000);
});

test('unique index numeric equality: 1, 1.0 and NumberLong(1) collide', async () => {
  const { Long, Double } = require('mongodb');
  const c = ctx.coll();
  await c.createIndex({ n: 1 }, { unique: true });
  await c.insertOne({ n: 1 });
  await expectServerError(c.insertOne({ n: new Double(1.0) }), 11000);
  await expectServerError(c.insertOne({ n: Long.fromNumber(1) }), 11000);
});

test('creating a unique index over existing duplicates fails with 11000 and leaves no index', async () => {
  const c = ctx.coll();
  await c.insertMany([{ u: 1 }, { u: 1 }]);
  await expectServerError(c.createIndex({ u: 1 }, { unique: true }), 11000);
  const idx = await indexMap(c);
  assert.equal(idx.u_1, undefined);
});

test('sparse unique index allows many documents without the field', async () => {
  const c = ctx.coll();
  await c.createIndex({ s: 1 }, { unique: true, sparse: true });
  assert.equal((await indexMap(c)).s_1.sparse, true);
  await c.insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3, s: 'x' }]);
  await expectServerError(c.insertOne({ _id: 4, s: 'x' }), 11000);
  assert.equal(await countByFind(c, {}), 3);
  // Queries must still see documents missing from a sparse index.
  assert.equal(await countByFind(c, { s: null }), 2);
});

test('partialFilterExpression unique index only constrains matching documents', async () => {
  const c = ctx.coll();
  await c.createIndex({ user: 1 }, { unique: true, partialFilterExpression: { active: true } });
  const idx = await indexMap(c);
  assert.deepEqual(idx.user_1.partialFilterExpression, { active: true });
  await c.insertMany([
    { user: 'u1', active: true },
    { user: 'u1', active: false },
    { user: 'u1', active: false },
  ]);
  await expectServerError(c.insertOne({ user: 'u1', active: true }), 11000);
  // An update that brings a document into the filter must be checked too.
  await expectServerError(c.updateOne({ user: 'u1', active: false }, { $set: { active: true } }), 11000);
  assert.equal(await countByFind(c, { active: true }), 1);
});

test('queries return the same results with and without a secondary index', async () => {
  const c = ctx.coll();
  const docs = Array.from({ length: 300 }, (_, i) => ({ _id: i, a: i % 17, b: i % 5, s: `k${i % 11}` }));
  await c.insertMany(docs);
  const queries = [
    { a: 3 },
    { a: { $gte: 5, $lt: 9 } },
    { a: { $in: [1, 16] }, b: 2 },
    { s: 'k4' },
    { a: { $gt: 15 }, s: { $ne: 'k1' } },
  ];
  const before = [];
  for (const q of queries) before.push(await c.find(q, { sort: { _id: 1 } }).toArray());
  await c.createIndex({ a: 1 });
  await c.createIndex({ a: 1, b: 1 });
  await c.createIndex({ s: -1 });
  for (let i = 0; i < queries.length; i++) {
    assert.deepEqual(await c.find(queries[i], { sort: { _id: 1 } }).toArray(), before[i], JSON.stringify(queries[i]));
    // Sort on the indexed field too.
    const sorted = await c.find(queries[i], { sort: { a: 1, _id: 1 } }).toArray();
    const expected = [...before[i]].sort((x, y) => x.a - y.a || x._id - y._id);
    assert.deepEqual(sorted, expected);
  }
  // Index stays correct through updates and deletes.
  await c.updateMany({ a: 3 }, { $set: { a: 100 } });
  await c.deleteMany({ b: 0 });
  assert.equal(await countByFind(c, { a: 3 }), 0);
  assert.deepEqual(
    (await c.find({ a: 100 }, { sort: { _id: 1 } }).toArray()).map((d) => d._id),
    docs.filter((d) => d.a === 3 && d.b !== 0).map((d) => d._id),
  );
});

test('equality on every field of a unique index: hits, misses, $in lists across batches, prefixes', async () => {
  // The planner reads such keys with one exact search each instead of a scan.
  const c = ctx.coll();
  await c.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: i, a: i % 4, b: i })));
  await c.createIndex({ a: 1, b: 1 }, { unique: true });
  const ids = (docs) => docs.map((d) => d._id);
  assert.deepEqual(ids(await c.find({ _id: 7 }).toArray()), [7]);
  assert.deepEqual(ids(await c.find({ _id: 70 }).toArray()), []);
  assert.deepEqual(ids(await c.find({ _id: 7.0, b: 8 }).toArray()), [], 'the rest of the filter still applies');
  assert.deepEqual(ids(await c.find({ _id: { $in: [9, 3, 70, 1, 3] } }, { batchSize: 1 }).toArray()), [1, 3, 9]);
  assert.deepEqual(ids(await c.find({ _id: { $in: [9, 3, 70, 1] } }, { sort: { _id: -1 }, batchSize: 2 }).toArray()), [9, 3, 1]);
  assert.deepEqual(ids(await c.find({ a: 1, b: 5 }).toArray()), [5]);
  assert.deepEqual(ids(await c.find({ a: 1, b: 6 }).toArray()), []);
  assert.deepEqual(ids(await c.find({ a: 1, b: { $in: [1, 2, 5, 9] } }, { batchSize: 1 }).toArray()), [1, 5, 9]);
  // Equality on a prefix only is a range of keys, not one key.
  assert.deepEqual(ids(await c.find({ a: 2 }, { sort: { _id: 1 } }).toArray()), [2, 6, 10, 14, 18]);
});

test('dropIndex by name and by key; missing index -> IndexNotFound (27); _id_ cannot be dropped (72)', async () => {
  const c = ctx.coll();
  await c.createIndex({ a: 1 });
  await c.createIndex({ b: 1 });
  await c.dropIndex('a_1');
  await ctx.db.command({ dropIndexes: c.collectionName, index: { b: 1 } });
  const names = Object.keys(await indexMap(c));
  assert.deepEqual(names, ['_id_']);
  await expectServerError(c.dropIndex('a_1'), 27, 'IndexNotFound');
  await expectServerError(c.dropIndex('_id_'), 72);
});

test("dropIndexes('*') drops everything except _id_", async () => {
  const c = ctx.coll();
  await c.createIndex({ a: 1 });
  await c.createIndex({ b: 1 }, { unique: true });
  await c.dropIndexes();
  assert.deepEqual(Object.keys(await indexMap(c)), ['_id_']);
  // Uniqueness is no longer enforced.
  await c.insertMany([{ b: 1 }, { b: 1 }]);
});

test('listIndexes on a missing collection -> NamespaceNotFound (26)', async () => {
  await expectServerError(ctx.db.command({ listIndexes: 'does_not_exist' }), 26);
});
