'use strict';
// Error replies: codes, codeNames and shape, as mongod sends them.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { useStore, expectServerError, countByFind } = require('../lib/fixture');

const ctx = useStore({ dbName: 'error_test' });

test('unknown command -> CommandNotFound (59) with mongod error shape', async () => {
  const err = await expectServerError(ctx.db.command({ notARealCommand: 1 }), 59, 'CommandNotFound');
  const reply = err.errorResponse;
  assert.equal(reply.ok, 0);
  assert.equal(reply.code, 59);
  assert.equal(reply.codeName, 'CommandNotFound');
  assert.match(reply.errmsg, /no such command: 'notARealCommand'/);
});

test('the connection is usable after an error', async () => {
  await expectServerError(ctx.db.command({ notARealCommand: 1 }), 59);
  const r = await ctx.db.command({ ping: 1 });
  assert.equal(r.ok, 1);
});

test('unknown query operator -> BadValue (2)', async () => {
  const c = ctx.coll();
  await c.insertOne({ a: 1 });
  const err = await expectServerError(c.find({ a: { $foo: 1 } }).toArray(), 2, 'BadValue');
  assert.match(err.message, /unknown operator: \$foo/);
  const top = await expectServerError(c.find({ $foo: 1 }).toArray(), 2);
  assert.match(top.message, /unknown top level operator: \$foo/);
});

test('malformed operator arguments -> BadValue (2)', async () => {
  const c = ctx.coll();
  await c.insertOne({ a: 1 });
  await expectServerError(c.find({ a: { $in: 5 } }).toArray(), 2);
  await expectServerError(c.find({ $and: [] }).toArray(), 2);
  await expectServerError(c.find({ $or: {} }).toArray(), 2);
  await expectServerError(c.find({ a: { $size: 'x' } }).toArray(), 2);
  await expectServerError(c.find({ a: { $exists: true, $regex: 5 } }).toArray(), 2);
  // The same errors through the count/delete/update paths.
  await expectServerError(ctx.db.command({ count: c.collectionName, query: { a: { $foo: 1 } } }), 2);
  await expectServerError(c.deleteMany({ a: { $foo: 1 } }), 2);
  await expectServerError(c.updateMany({ a: { $foo: 1 } }, { $set: { b: 1 } }), 2);
  assert.equal(await countByFind(c, {}), 1);
});

test('bad filter through countDocuments (an aggregate $match) -> BadValue (2)', async () => {
  const c = ctx.coll();
  await c.insertOne({ a: 1 });
  await expectServerError(c.countDocuments({ a: { $foo: 1 } }), 2);
});

test('wrong field type in a command -> TypeMismatch (14)', async () => {
  const c = ctx.coll();
  await c.insertOne({ a: 1 });
  await expectServerError(ctx.db.command({ find: c.collectionName, filter: 'not a document' }), 14);
  await expectServerError(ctx.db.command({ find: c.collectionName, limit: 'ten' }), 14);
  await expectServerError(ctx.db.command({ count: c.collectionName, query: 5 }), 14);
});

test('unknown command field -> IDLUnknownField (40415)', async () => {
  const c = ctx.coll();
  await c.insertOne({ a: 1 });
  await expectServerError(ctx.db.command({ find: c.collectionName, bogusOption: 1 }), 40415);
});

test('admin-only commands on another database -> Unauthorized (13)', async () => {
  await expectServerError(ctx.db.command({ listDatabases: 1 }), 13);
  await expectServerError(ctx.db.command({ renameCollection: 'error_test.a', to: 'error_test.b' }), 13);
});

test('insert with an empty documents array -> InvalidLength (16)', async () => {
  const c = ctx.coll();
  await expectServerError(ctx.db.command({ insert: c.collectionName, documents: [] }), 16, 'InvalidLength');
});

test('write errors do not abort the connection or other operations', async () => {
  const c = ctx.coll();
  await c.insertOne({ _id: 1 });
  const results = await Promise.allSettled(
    Array.from({ length: 20 }, (_, i) => c.insertOne({ _id: i % 2 === 0 ? 1 : 100 + i })),
  );
  const failed = results.filter((r) => r.status === 'rejected');
  assert.equal(failed.length, 10);
  for (const f of failed) assert.equal(f.reason.code, 11000);
  assert.equal(await countByFind(c, {}), 11);
});
