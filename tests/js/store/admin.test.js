'use strict';
// Databases and collections: list/create/drop/rename, collStats/dbStats.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { useStore, expectServerError, countByFind } = require('../lib/fixture');

const ctx = useStore({ dbName: 'admin_test' });

async function collNames(db) {
  return (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name).sort();
}
async function dbNames() {
  const r = await ctx.client.db('admin').admin().listDatabases();
  return r.databases.map((d) => d.name);
}

test('listDatabases lists a database once it has data, with sizes', async () => {
  const db = ctx.client.db('ld_one');
  await db.collection('c').insertOne({ x: 1 });
  const r = await ctx.client.db('admin').command({ listDatabases: 1 });
  assert.equal(r.ok, 1);
  const entry = r.databases.find((d) => d.name === 'ld_one');
  assert.ok(entry, 'ld_one listed');
  assert.equal(typeof entry.sizeOnDisk, 'number');
  assert.equal(entry.empty, false);
  assert.equal(typeof r.totalSize, 'number');
  const names = await ctx.client.db('admin').command({ listDatabases: 1, nameOnly: true });
  assert.ok(names.databases.some((d) => d.name === 'ld_one'));
  for (const d of names.databases) assert.deepEqual(Object.keys(d), ['name']);
});

test('listDatabases with a filter', async () => {
  await ctx.client.db('ld_filter_a').collection('c').insertOne({});
  await ctx.client.db('ld_filter_b').collection('c').insertOne({});
  const r = await ctx.client.db('admin').command({ listDatabases: 1, filter: { name: /^ld_filter_/ } });
  assert.deepEqual(r.databases.map((d) => d.name).sort(), ['ld_filter_a', 'ld_filter_b']);
});

test('a database with no collections is not listed', async () => {
  ctx.client.db('ld_never_used');
  assert.ok(!(await dbNames()).includes('ld_never_used'));
});

test('createCollection, listCollections shape and filter', async () => {
  const db = ctx.client.db('lc_test');
  await db.createCollection('alpha');
  await db.createCollection('beta');
  assert.deepEqual(await collNames(db), ['alpha', 'beta']);
  const full = await db.command({ listCollections: 1, filter: { name: 'alpha' } });
  assert.equal(full.cursor.ns, 'lc_test.$cmd.listCollections');
  assert.equal(full.cursor.firstBatch.length, 1);
  const info = full.cursor.firstBatch[0];
  assert.equal(info.name, 'alpha');
  assert.equal(info.type, 'collection');
  assert.equal(typeof info.options, 'object');
  assert.equal(info.info.readOnly, false);
  assert.ok(info.info.uuid, 'collection uuid');
  assert.deepEqual(info.idIndex.key, { _id: 1 });
});

test('create an existing collection -> NamespaceExists (48)', async () => {
  const db = ctx.client.db('lc_exists');
  await db.createCollection('x');
  await expectServerError(db.command({ create: 'x' }), 48, 'NamespaceExists');
});

test('invalid collection names are rejected (InvalidNamespace, 73)', async () => {
  const db = ctx.client.db('lc_badname');
  await expectServerError(db.command({ create: 'has$dollar' }), 73);
  await expectServerError(db.command({ create: '' }), 73);
});

test('insert implicitly creates the collection and the database', async () => {
  const db = ctx.client.db('implicit_db');
  await db.collection('auto').insertOne({ a: 1 });
  assert.deepEqual(await collNames(db), ['auto']);
  assert.ok((await dbNames()).includes('implicit_db'));
});

test('drop removes the collection and its data and indexes', async () => {
  const db = ctx.client.db('drop_test');
  const c = db.collection('gone');
  await c.insertMany([{ a: 1 }, { a: 2 }]);
  await c.createIndex({ a: 1 });
  assert.equal(await c.drop(), true);
  assert.deepEqual(await collNames(db), []);
  assert.equal(await countByFind(c, {}), 0);
  // Recreated collection starts empty with only _id_.
  await c.insertOne({ a: 3 });
  const idx = await c.listIndexes().toArray();
  assert.deepEqual(idx.map((i) => i.name), ['_id_']);
  assert.equal(await countByFind(c, {}), 1);
});

test('drop of a missing collection does not fail', async () => {
  const db = ctx.client.db('drop_missing');
  const r = await db.command({ drop: 'never' }).catch((e) => e);
  // mongod 7.0 answers ok: 1; older servers answer NamespaceNotFound (26). Both are fine.
  assert.ok(r.ok === 1 || r.code === 26, `unexpected ${r}`);
});

test('dropDatabase removes all its collections and it leaves listDatabases', async () => {
  const db = ctx.client.db('dropdb_test');
  await db.collection('a').insertOne({});
  await db.collection('b').insertOne({});
  assert.ok((await dbNames()).includes('dropdb_test'));
  assert.equal(await db.dropDatabase(), true);
  assert.ok(!(await dbNames()).includes('dropdb_test'));
  assert.deepEqual(await collNames(db), []);
  assert.equal(await countByFind(db.collection('a'), {}), 0);
});

test('renameCollection moves data and indexes; source disappears', async () => {
  const db = ctx.client.db('rename_test');
  const src = db.collection('src');
  await src.insertMany([{ _id: 1 }, { _id: 2 }]);
  await src.createIndex({ x: 1 });
  await src.rename('dst');
  assert.deepEqual(await collNames(db), ['dst']);
  const dst = db.collection('dst');
  assert.equal(await countByFind(dst, {}), 2);
  assert.deepEqual((await dst.listIndexes().toArray()).map((i) => i.name).sort(), ['_id_', 'x_1']);
});

test('renameCollection onto an existing target: 48 unless dropTarget', async () => {
  const db = ctx.client.db('rename_target');
  await db.collection('a').insertOne({ _id: 'a' });
  await db.collection('b').insertOne({ _id: 'b' });
  await expectServerError(
    ctx.client.db('admin').command({ renameCollection: 'rename_target.a', to: 'rename_target.b' }),
    48,
  );
  await ctx.client.db('admin').command({ renameCollection: 'rename_target.a', to: 'rename_target.b', dropTarget: true });
  assert.deepEqual(await collNames(db), ['b']);
  assert.deepEqual(await db.collection('b').find().toArray(), [{ _id: 'a' }]);
});

test('renameCollection of a missing source -> NamespaceNotFound (26)', async () => {
  await expectServerError(
    ctx.client.db('admin').command({ renameCollection: 'rename_missing.nope', to: 'rename_missing.x' }),
    26,
  );
});

test('renameCollection across databases', async () => {
  await ctx.client.db('rn_from').collection('c').insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
  await ctx.client.db('admin').command({ renameCollection: 'rn_from.c', to: 'rn_to.c2' });
  assert.equal(await countByFind(ctx.client.db('rn_to').collection('c2'), {}), 3);
  assert.deepEqual(await collNames(ctx.client.db('rn_from')), []);
});

test('collStats reports ns, count, sizes, indexes', async () => {
  const c = ctx.coll();
  await c.insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i, s: 'x'.repeat(100) })));
  await c.createIndex({ s: 1 });
  const r = await ctx.db.command({ collStats: c.collectionName });
  assert.equal(r.ok, 1);
  assert.equal(r.ns, `admin_test.${c.collectionName}`);
  assert.equal(r.count, 10);
  assert.ok(r.size > 1000, `size ${r.size}`);
  assert.equal(typeof r.storageSize, 'number');
  assert.equal(r.nindexes, 2);
  assert.equal(typeof r.totalIndexSize, 'number');
  assert.ok('_id_' in r.indexSizes && 's_1' in r.indexSizes);
});

test('dbStats reports collections, objects, sizes', async () => {
  const db = ctx.client.db('dbstats_test');
  await db.collection('a').insertMany([{}, {}, {}]);
  await db.collection('b').insertOne({});
  const r = await db.command({ dbStats: 1 });
  assert.equal(r.ok, 1);
  assert.equal(r.db, 'dbstats_test');
  assert.equal(r.collections, 2);
  assert.equal(r.objects, 4);
  assert.equal(typeof r.dataSize, 'number');
  assert.equal(typeof r.storageSize, 'number');
  assert.equal(r.indexes, 2);
});

test('listCollections after many creates and drops stays consistent', async () => {
  const db = ctx.client.db('churn_test');
  for (let i = 0; i < 20; i++) await db.createCollection(`c${i}`);
  for (let i = 0; i < 20; i += 2) await db.collection(`c${i}`).drop();
  assert.deepEqual(
    await collNames(db),
    Array.from({ length: 10 }, (_, i) => `c${2 * i + 1}`).sort(),
  );
});
