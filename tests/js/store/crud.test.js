'use strict';
// CRUD through the Node driver, asserting what mongod 7.0 returns.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { MongoBulkWriteError, MongoServerError, ObjectId } = require('mongodb');
const { useStore, expectServerError, countByFind } = require('../lib/fixture');

const ctx = useStore({ dbName: 'crud_test' });

async function seeded(docs) {
  const c = ctx.coll();
  if (docs.length) await c.insertMany(docs);
  return c;
}
const byId = { sort: { _id: 1 } };

// ---------------------------------------------------------------- inserts

test('insertOne returns insertedId and the document reads back', async () => {
  const c = ctx.coll();
  const r = await c.insertOne({ _id: 1, a: 'x', nested: { b: [1, 2, { c: 3 }] } });
  assert.equal(r.acknowledged, true);
  assert.equal(r.insertedId, 1);
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, a: 'x', nested: { b: [1, 2, { c: 3 }] } });
});

test('insertOne without _id gets an ObjectId', async () => {
  const c = ctx.coll();
  const r = await c.insertOne({ a: 1 });
  assert.ok(r.insertedId instanceof ObjectId);
  const back = await c.findOne({ a: 1 });
  assert.ok(back._id.equals(r.insertedId));
});

test('BSON types round trip unchanged', async () => {
  const { Long, Decimal128, Binary, Timestamp, MinKey, MaxKey, BSONRegExp } = require('mongodb');
  const c = ctx.coll();
  const doc = {
    _id: 'types',
    i32: 7,
    i64: Long.fromString('9007199254740993'),
    dbl: 1.5,
    dec: Decimal128.fromString('1.10'),
    str: 'héllo',
    bool: true,
    nul: null,
    date: new Date('2024-01-02T03:04:05.678Z'),
    oid: new ObjectId('65a1b2c3d4e5f60718293a4b'),
    bin: new Binary(Buffer.from([0, 1, 2, 255]), 0),
    uuid: new Binary(Buffer.alloc(16, 7), 4),
    ts: new Timestamp({ t: 123, i: 4 }),
    re: new BSONRegExp('^a.*b$', 'i'),
    min: new MinKey(),
    max: new MaxKey(),
    arr: [1, 'two', [3], { four: 4 }],
    obj: { nested: { deep: true } },
  };
  await c.insertOne(doc);
  const back = await c.findOne({ _id: 'types' }, { promoteLongs: false, bsonRegExp: true });
  assert.equal(back.i64.toString(), '9007199254740993');
  assert.equal(back.dec.toString(), '1.10');
  assert.equal(back.str, 'héllo');
  assert.equal(back.nul, null);
  assert.equal(back.date.toISOString(), '2024-01-02T03:04:05.678Z');
  assert.ok(back.oid.equals(doc.oid));
  assert.deepEqual(Buffer.from(back.bin.buffer), Buffer.from([0, 1, 2, 255]));
  assert.equal(back.uuid.sub_type, 4);
  assert.equal(back.ts.t, 123);
  assert.equal(back.ts.i, 4);
  assert.equal(back.re.pattern, '^a.*b$');
  assert.equal(back.min._bsontype, 'MinKey');
  assert.equal(back.max._bsontype, 'MaxKey');
  assert.deepEqual(back.arr, [1, 'two', [3], { four: 4 }]);
  assert.deepEqual(Object.keys(back), Object.keys(doc), 'field order is preserved');
  // Numeric types are preserved: an int stays an int, a double a double.
  const raw = await c.findOne({ _id: 'types' }, { promoteValues: false });
  assert.equal(raw.i32._bsontype, 'Int32');
  assert.equal(raw.dbl._bsontype, 'Double');
});

test('insertOne duplicate _id -> E11000 (code 11000) with keyPattern/keyValue', async () => {
  const c = await seeded([{ _id: 1 }]);
  const err = await expectServerError(c.insertOne({ _id: 1, x: 2 }), 11000);
  assert.ok(err instanceof MongoServerError);
  assert.match(err.message, /E11000 duplicate key error/);
  assert.deepEqual(err.keyPattern, { _id: 1 });
  assert.deepEqual(err.keyValue, { _id: 1 });
  assert.equal(await countByFind(c, {}), 1);
});

test('insertMany ordered stops at the first duplicate; writeErrors shape', async () => {
  const c = await seeded([]);
  let err;
  try {
    await c.insertMany([{ _id: 1 }, { _id: 2 }, { _id: 1 }, { _id: 3 }], { ordered: true });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof MongoBulkWriteError, `expected MongoBulkWriteError, got ${err}`);
  assert.equal(err.code, 11000);
  assert.equal(err.result.insertedCount, 2);
  assert.equal(err.writeErrors.length, 1);
  const we = err.writeErrors[0];
  assert.equal(we.index, 2);
  assert.equal(we.code, 11000);
  assert.match(we.errmsg, /E11000 duplicate key error/);
  assert.deepEqual(
    (await c.find({}, byId).toArray()).map((d) => d._id),
    [1, 2],
  );
});

test('insertMany unordered continues past duplicates and reports each', async () => {
  const c = await seeded([{ _id: 2 }]);
  let err;
  try {
    await c.insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3 }, { _id: 3 }, { _id: 4 }], { ordered: false });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof MongoBulkWriteError);
  assert.equal(err.result.insertedCount, 3);
  assert.deepEqual(
    err.writeErrors.map((w) => [w.index, w.code]),
    [
      [1, 11000],
      [3, 11000],
    ],
  );
  assert.deepEqual(
    (await c.find({}, byId).toArray()).map((d) => d._id),
    [1, 2, 3, 4],
  );
});

test('raw insert command reply: n and writeErrors', async () => {
  const name = ctx.collName();
  const r = await ctx.db.command({
    insert: name,
    documents: [{ _id: 1 }, { _id: 1 }, { _id: 2 }],
    ordered: false,
  });
  assert.equal(r.ok, 1);
  assert.equal(r.n, 2);
  assert.equal(r.writeErrors.length, 1);
  assert.equal(r.writeErrors[0].index, 1);
  assert.equal(r.writeErrors[0].code, 11000);
  assert.equal(typeof r.writeErrors[0].errmsg, 'string');
});

test('insertMany of 5000 documents in one call', async () => {
  const c = ctx.coll();
  const docs = Array.from({ length: 5000 }, (_, i) => ({ _id: i, v: i % 10 }));
  const r = await c.insertMany(docs);
  assert.equal(r.insertedCount, 5000);
  assert.equal(await countByFind(c, {}), 5000);
  assert.equal(await countByFind(c, { v: 3 }), 500);
});

test('_id of array type is rejected (code 53 InvalidIdField)', async () => {
  const c = ctx.coll();
  await expectServerError(c.insertOne({ _id: [1, 2] }), 53);
});

// ---------------------------------------------------------------- find

const PEOPLE = [
  { _id: 1, name: 'ann', age: 31, tags: ['a', 'b'], addr: { city: 'oslo', zip: 100 } },
  { _id: 2, name: 'bob', age: 25, tags: ['b'], addr: { city: 'rome', zip: 200 } },
  { _id: 3, name: 'cat', age: 40, tags: [], addr: { city: 'oslo', zip: 300 } },
  { _id: 4, name: 'dan', age: 25, addr: { city: 'lima', zip: 400 } },
  { _id: 5, name: 'eve', age: null, tags: ['c', 'a'] },
];

test('find with equality, comparison, logical, array and nested filters', async () => {
  const c = await seeded(PEOPLE);
  const ids = async (f, o = byId) => (await c.find(f, o).toArray()).map((d) => d._id);
  assert.deepEqual(await ids({}), [1, 2, 3, 4, 5]);
  assert.deepEqual(await ids({ age: 25 }), [2, 4]);
  assert.deepEqual(await ids({ age: { $gt: 25 } }), [1, 3]);
  assert.deepEqual(await ids({ age: { $gte: 25, $lt: 40 } }), [1, 2, 4]);
  assert.deepEqual(await ids({ age: { $in: [31, 40] } }), [1, 3]);
  assert.deepEqual(await ids({ age: { $nin: [25, 31] } }), [3, 5]);
  assert.deepEqual(await ids({ age: { $ne: 25 } }), [1, 3, 5]);
  assert.deepEqual(await ids({ age: null }), [5]);
  assert.deepEqual(await ids({ tags: 'a' }), [1, 5]);
  assert.deepEqual(await ids({ tags: { $all: ['a', 'b'] } }), [1]);
  assert.deepEqual(await ids({ tags: { $size: 0 } }), [3]);
  assert.deepEqual(await ids({ tags: { $exists: false } }), [4]);
  assert.deepEqual(await ids({ 'addr.city': 'oslo' }), [1, 3]);
  assert.deepEqual(await ids({ addr: { city: 'rome', zip: 200 } }), [2]);
  assert.deepEqual(await ids({ $or: [{ name: 'ann' }, { age: 40 }] }), [1, 3]);
  assert.deepEqual(await ids({ $and: [{ age: 25 }, { name: 'dan' }] }), [4]);
  assert.deepEqual(await ids({ $nor: [{ age: 25 }, { age: null }] }), [1, 3]);
  assert.deepEqual(await ids({ age: { $not: { $gt: 30 } } }), [2, 4, 5]);
  assert.deepEqual(await ids({ name: { $regex: '^[ab]' } }), [1, 2]);
  assert.deepEqual(await ids({ name: /^C/i }), [3]);
  assert.deepEqual(await ids({ age: { $type: 'null' } }), [5]);
  assert.deepEqual(await ids({ tags: { $elemMatch: { $eq: 'c' } } }), [5]);
});

test('find with projection (inclusion, exclusion, _id suppression, dotted)', async () => {
  const c = await seeded(PEOPLE);
  assert.deepEqual(await c.find({ _id: 1 }, { projection: { name: 1 } }).toArray(), [{ _id: 1, name: 'ann' }]);
  assert.deepEqual(await c.find({ _id: 1 }, { projection: { name: 1, _id: 0 } }).toArray(), [{ name: 'ann' }]);
  assert.deepEqual(await c.find({ _id: 2 }, { projection: { tags: 0, addr: 0 } }).toArray(), [
    { _id: 2, name: 'bob', age: 25 },
  ]);
  assert.deepEqual(await c.find({ _id: 3 }, { projection: { 'addr.city': 1 } }).toArray(), [
    { _id: 3, addr: { city: 'oslo' } },
  ]);
});

test('mixing inclusion and exclusion in a projection fails (code 31254)', async () => {
  const c = await seeded(PEOPLE);
  await expectServerError(c.find({}, { projection: { name: 1, age: 0 } }).toArray(), 31254);
});

test('find with sort, skip and limit', async () => {
  const c = await seeded(PEOPLE);
  const ids = async (o) => (await c.find({}, o).toArray()).map((d) => d._id);
  // null sorts before numbers; ties keep no particular order, so break them with _id.
  assert.deepEqual(await ids({ sort: { age: 1, _id: 1 } }), [5, 2, 4, 1, 3]);
  assert.deepEqual(await ids({ sort: { age: -1, _id: -1 } }), [3, 1, 4, 2, 5]);
  assert.deepEqual(await ids({ sort: { name: -1 } }), [5, 4, 3, 2, 1]);
  assert.deepEqual(await ids({ sort: { _id: 1 }, skip: 2 }), [3, 4, 5]);
  assert.deepEqual(await ids({ sort: { _id: 1 }, limit: 2 }), [1, 2]);
  assert.deepEqual(await ids({ sort: { _id: 1 }, skip: 1, limit: 3 }), [2, 3, 4]);
  assert.deepEqual(await ids({ sort: { 'addr.zip': -1 } }), [4, 3, 2, 1, 5]);
  assert.deepEqual(await ids({ sort: { _id: 1 }, skip: 10 }), []);
});

test('sort across mixed types follows BSON type order', async () => {
  const c = await seeded([
    { _id: 1, v: 'str' },
    { _id: 2, v: 10 },
    { _id: 3, v: null },
    { _id: 4, v: { a: 1 } },
    { _id: 5, v: true },
    { _id: 6, v: 2.5 },
    { _id: 7 },
  ]);
  const ids = (await c.find({}, { sort: { v: 1, _id: 1 } }).toArray()).map((d) => d._id);
  // missing == null < numbers < string < object < bool
  assert.deepEqual(ids, [3, 7, 6, 2, 1, 4, 5]);
});

test('findOne returns null when nothing matches', async () => {
  const c = await seeded(PEOPLE);
  assert.equal(await c.findOne({ _id: 99 }), null);
});

test('negative skip is rejected (code 51024)', async () => {
  const c = await seeded(PEOPLE);
  await expectServerError(ctx.db.command({ find: c.collectionName, skip: -1 }), 51024);
});

// ---------------------------------------------------------------- updates

test('updateOne with $set/$inc/$unset/$push/$addToSet/$pull/$rename', async () => {
  const c = await seeded([{ _id: 1, a: 1, b: 'x', arr: [1, 2], old: 5, cnt: 10 }]);
  let r = await c.updateOne(
    { _id: 1 },
    { $set: { b: 'y', 'n.deep': true }, $inc: { cnt: 5 }, $unset: { a: '' }, $push: { arr: 3 }, $rename: { old: 'renamed' } },
  );
  assert.equal(r.matchedCount, 1);
  assert.equal(r.modifiedCount, 1);
  assert.equal(r.upsertedCount, 0);
  assert.equal(r.upsertedId, null);
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, b: 'y', arr: [1, 2, 3], cnt: 15, n: { deep: true }, renamed: 5 });
  r = await c.updateOne({ _id: 1 }, { $addToSet: { arr: 2 }, $pull: { arr: 1 } }).catch((e) => e);
  // $addToSet and $pull on the same path conflict.
  assert.equal(r.code, 40);
  await c.updateOne({ _id: 1 }, { $addToSet: { arr: { $each: [2, 4] } } });
  await c.updateOne({ _id: 1 }, { $pull: { arr: { $lt: 3 } } });
  assert.deepEqual((await c.findOne({ _id: 1 })).arr, [3, 4]);
});

test('updateOne: $min/$max/$mul/$currentDate/$setOnInsert/$pop and positional $', async () => {
  const c = await seeded([{ _id: 1, lo: 5, hi: 5, m: 3, arr: [1, 2, 3], grades: [{ g: 80 }, { g: 90 }] }]);
  await c.updateOne({ _id: 1 }, { $min: { lo: 2 }, $max: { hi: 9 }, $mul: { m: 4 }, $currentDate: { at: true }, $pop: { arr: 1 } });
  await c.updateOne({ _id: 1, 'grades.g': 90 }, { $set: { 'grades.$.g': 95 } });
  await c.updateOne({ _id: 1 }, { $setOnInsert: { never: 1 } });
  const d = await c.findOne({ _id: 1 });
  assert.equal(d.lo, 2);
  assert.equal(d.hi, 9);
  assert.equal(d.m, 12);
  assert.ok(d.at instanceof Date);
  assert.deepEqual(d.arr, [1, 2]);
  assert.deepEqual(d.grades, [{ g: 80 }, { g: 95 }]);
  assert.equal(d.never, undefined);
});

test('updateOne that changes nothing: matched 1, modified 0', async () => {
  const c = await seeded([{ _id: 1, a: 1 }]);
  const r = await c.updateOne({ _id: 1 }, { $set: { a: 1 } });
  assert.equal(r.matchedCount, 1);
  assert.equal(r.modifiedCount, 0);
});

test('updateOne with no match and no upsert', async () => {
  const c = await seeded([{ _id: 1 }]);
  const r = await c.updateOne({ _id: 2 }, { $set: { a: 1 } });
  assert.equal(r.matchedCount, 0);
  assert.equal(r.modifiedCount, 0);
  assert.equal(r.upsertedCount, 0);
});

test('updateOne upsert inserts from query equality fields and $setOnInsert', async () => {
  const c = await seeded([]);
  const r = await c.updateOne({ _id: 7, kind: 'k' }, { $set: { v: 1 }, $setOnInsert: { created: true } }, { upsert: true });
  assert.equal(r.matchedCount, 0);
  assert.equal(r.upsertedCount, 1);
  assert.equal(r.upsertedId, 7);
  assert.deepEqual(await c.findOne({ _id: 7 }), { _id: 7, kind: 'k', v: 1, created: true });
  const r2 = await c.updateOne({ kind: 'other' }, { $set: { v: 2 } }, { upsert: true });
  assert.ok(r2.upsertedId instanceof ObjectId);
});

test('updateMany updates all matches', async () => {
  const c = await seeded([
    { _id: 1, g: 'a', n: 1 },
    { _id: 2, g: 'a', n: 2 },
    { _id: 3, g: 'b', n: 3 },
  ]);
  const r = await c.updateMany({ g: 'a' }, { $inc: { n: 10 } });
  assert.equal(r.matchedCount, 2);
  assert.equal(r.modifiedCount, 2);
  assert.deepEqual(
    (await c.find({}, byId).toArray()).map((d) => d.n),
    [11, 12, 3],
  );
});

test('updateMany with arrayFilters', async () => {
  const c = await seeded([{ _id: 1, xs: [1, 5, 10] }]);
  await c.updateMany({}, { $set: { 'xs.$[big]': 0 } }, { arrayFilters: [{ big: { $gte: 5 } }] });
  assert.deepEqual((await c.findOne({ _id: 1 })).xs, [1, 0, 0]);
});

test('update with an aggregation pipeline', async () => {
  const c = await seeded([{ _id: 1, a: 2, b: 3 }]);
  await c.updateOne({ _id: 1 }, [{ $set: { sum: { $add: ['$a', '$b'] } } }, { $unset: 'a' }]);
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, b: 3, sum: 5 });
});

test('replaceOne replaces the whole document but keeps _id', async () => {
  const c = await seeded([{ _id: 1, a: 1, b: 2 }]);
  const r = await c.replaceOne({ _id: 1 }, { c: 3 });
  assert.equal(r.matchedCount, 1);
  assert.equal(r.modifiedCount, 1);
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, c: 3 });
  const up = await c.replaceOne({ _id: 2 }, { d: 4 }, { upsert: true });
  assert.equal(up.upsertedId, 2);
  assert.deepEqual(await c.findOne({ _id: 2 }), { _id: 2, d: 4 });
});

test('bad updates fail with mongod codes', async () => {
  const c = await seeded([{ _id: 1, s: 'str', n: 1 }]);
  // Unknown modifier -> FailedToParse (9).
  await expectServerError(c.updateOne({ _id: 1 }, { $foo: { a: 1 } }), 9);
  // $inc with a non-numeric argument -> TypeMismatch (14).
  await expectServerError(c.updateOne({ _id: 1 }, { $inc: { n: 'x' } }), 14);
  // $inc on a non-numeric field -> TypeMismatch (14).
  await expectServerError(c.updateOne({ _id: 1 }, { $inc: { s: 1 } }), 14);
  // Two operators on one path -> ConflictingUpdateOperators (40).
  await expectServerError(c.updateOne({ _id: 1 }, { $set: { n: 1 }, $inc: { n: 1 } }), 40);
  // Changing _id -> ImmutableField (66).
  await expectServerError(c.updateOne({ _id: 1 }, { $set: { _id: 2 } }), 66);
  await expectServerError(c.replaceOne({ _id: 1 }, { _id: 2, x: 1 }), 66);
  // $push onto a non-array -> BadValue (2).
  await expectServerError(c.updateOne({ _id: 1 }, { $push: { s: 1 } }), 2);
  // Nothing changed.
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, s: 'str', n: 1 });
});

test('raw update command with a bad modifier reports a writeError, ok: 1', async () => {
  const c = await seeded([{ _id: 1 }]);
  const r = await ctx.db.command({ update: c.collectionName, updates: [{ q: { _id: 1 }, u: { $foo: { a: 1 } } }] });
  assert.equal(r.ok, 1);
  assert.equal(r.n, 0);
  assert.equal(r.nModified, 0);
  assert.equal(r.writeErrors[0].index, 0);
  assert.equal(r.writeErrors[0].code, 9);
});

// ---------------------------------------------------------------- deletes

test('deleteOne deletes exactly one match; deleteMany all', async () => {
  const c = await seeded([
    { _id: 1, g: 'a' },
    { _id: 2, g: 'a' },
    { _id: 3, g: 'b' },
    { _id: 4, g: 'a' },
  ]);
  const r1 = await c.deleteOne({ g: 'a' });
  assert.equal(r1.deletedCount, 1);
  assert.equal(await countByFind(c, { g: 'a' }), 2);
  const r2 = await c.deleteMany({ g: 'a' });
  assert.equal(r2.deletedCount, 2);
  assert.deepEqual(await c.find({}).toArray(), [{ _id: 3, g: 'b' }]);
  const r3 = await c.deleteMany({ g: 'zzz' });
  assert.equal(r3.deletedCount, 0);
  const r4 = await c.deleteMany({});
  assert.equal(r4.deletedCount, 1);
  assert.equal(await countByFind(c, {}), 0);
});

// ---------------------------------------------------------------- findAndModify

test('findOneAndUpdate returns before/after, honours sort, projection, upsert', async () => {
  const c = await seeded([
    { _id: 1, q: 'x', n: 1 },
    { _id: 2, q: 'x', n: 2 },
  ]);
  const before = await c.findOneAndUpdate({ q: 'x' }, { $inc: { n: 100 } }, { sort: { n: -1 } });
  assert.deepEqual(before, { _id: 2, q: 'x', n: 2 });
  const after = await c.findOneAndUpdate(
    { q: 'x' },
    { $inc: { n: 100 } },
    { sort: { n: 1 }, returnDocument: 'after', projection: { n: 1, _id: 0 } },
  );
  assert.deepEqual(after, { n: 101 });
  const none = await c.findOneAndUpdate({ q: 'nope' }, { $set: { n: 0 } });
  assert.equal(none, null);
  const ups = await c.findOneAndUpdate({ _id: 3 }, { $set: { n: 3 } }, { upsert: true, returnDocument: 'after' });
  assert.deepEqual(ups, { _id: 3, n: 3 });
  const upsBefore = await c.findOneAndUpdate({ _id: 4 }, { $set: { n: 4 } }, { upsert: true });
  assert.equal(upsBefore, null);
  assert.equal(await countByFind(c, {}), 4);
});

test('findOneAndUpdate includeResultMetadata exposes lastErrorObject', async () => {
  const c = await seeded([{ _id: 1, n: 1 }]);
  const r = await c.findOneAndUpdate({ _id: 1 }, { $inc: { n: 1 } }, { includeResultMetadata: true, returnDocument: 'after' });
  assert.equal(r.ok, 1);
  assert.deepEqual(r.value, { _id: 1, n: 2 });
  assert.equal(r.lastErrorObject.n, 1);
  assert.equal(r.lastErrorObject.updatedExisting, true);
  const u = await c.findOneAndUpdate({ _id: 9 }, { $set: { n: 9 } }, { includeResultMetadata: true, upsert: true });
  assert.equal(u.value, null);
  assert.equal(u.lastErrorObject.updatedExisting, false);
  assert.equal(u.lastErrorObject.upserted, 9);
});

test('findOneAndReplace returns before/after with sort/projection/upsert', async () => {
  const c = await seeded([
    { _id: 1, k: 'a', v: 1 },
    { _id: 2, k: 'a', v: 2 },
  ]);
  const prev = await c.findOneAndReplace({ k: 'a' }, { k: 'b', v: 20 }, { sort: { v: -1 } });
  assert.deepEqual(prev, { _id: 2, k: 'a', v: 2 });
  const next = await c.findOneAndReplace({ k: 'a' }, { k: 'c', v: 10 }, { returnDocument: 'after', projection: { _id: 0 } });
  assert.deepEqual(next, { k: 'c', v: 10 });
  const ups = await c.findOneAndReplace({ _id: 5 }, { k: 'z' }, { upsert: true, returnDocument: 'after' });
  assert.deepEqual(ups, { _id: 5, k: 'z' });
  assert.deepEqual(await c.find({}, byId).toArray(), [
    { _id: 1, k: 'c', v: 10 },
    { _id: 2, k: 'b', v: 20 },
    { _id: 5, k: 'z' },
  ]);
});

test('findOneAndDelete returns the deleted document, honours sort/projection', async () => {
  const c = await seeded([
    { _id: 1, v: 5 },
    { _id: 2, v: 9 },
    { _id: 3, v: 7 },
  ]);
  assert.deepEqual(await c.findOneAndDelete({}, { sort: { v: -1 } }), { _id: 2, v: 9 });
  assert.deepEqual(await c.findOneAndDelete({ v: { $lt: 6 } }, { projection: { _id: 1 } }), { _id: 1 });
  assert.equal(await c.findOneAndDelete({ v: 100 }), null);
  assert.deepEqual(await c.find({}).toArray(), [{ _id: 3, v: 7 }]);
});

// ---------------------------------------------------------------- counting, distinct

test('countDocuments with filter/skip/limit, estimatedDocumentCount', async () => {
  const c = await seeded(Array.from({ length: 50 }, (_, i) => ({ _id: i, even: i % 2 === 0 })));
  assert.equal(await c.countDocuments({}), 50);
  assert.equal(await c.countDocuments({ even: true }), 25);
  assert.equal(await c.countDocuments({}, { skip: 45 }), 5);
  assert.equal(await c.countDocuments({}, { limit: 7 }), 7);
  assert.equal(await c.estimatedDocumentCount(), 50);
  assert.equal(await ctx.db.collection('never_created_count').estimatedDocumentCount(), 0);
  assert.equal(await ctx.db.collection('never_created_count').countDocuments({}), 0);
});

test('count command with query/skip/limit', async () => {
  const c = await seeded(Array.from({ length: 10 }, (_, i) => ({ _id: i })));
  const r = await ctx.db.command({ count: c.collectionName, query: { _id: { $gte: 3 } }, skip: 2, limit: 4 });
  assert.equal(r.ok, 1);
  assert.equal(r.n, 4);
});

test('distinct flattens arrays and dedups', async () => {
  const c = await seeded([
    { _id: 1, t: 'a', tags: ['x', 'y'], n: { v: 1 } },
    { _id: 2, t: 'b', tags: ['y', 'z'], n: { v: 1 } },
    { _id: 3, t: 'a', tags: 'x', n: { v: 2 } },
    { _id: 4 },
  ]);
  assert.deepEqual((await c.distinct('t')).sort(), ['a', 'b']);
  assert.deepEqual((await c.distinct('tags')).sort(), ['x', 'y', 'z']);
  assert.deepEqual((await c.distinct('n.v')).sort(), [1, 2]);
  assert.deepEqual((await c.distinct('t', { _id: { $gt: 1 } })).sort(), ['a', 'b']);
  assert.deepEqual(await c.distinct('missing'), []);
});

// ---------------------------------------------------------------- aggregate

const SALES = [
  { _id: 1, item: 'a', qty: 2, price: 10, day: 1 },
  { _id: 2, item: 'b', qty: 1, price: 20, day: 1 },
  { _id: 3, item: 'a', qty: 5, price: 10, day: 2 },
  { _id: 4, item: 'c', qty: 3, price: 5, day: 2 },
  { _id: 5, item: 'b', qty: 4, price: 20, day: 3 },
];

test('aggregate $match/$group/$sort with accumulators', async () => {
  const c = await seeded(SALES);
  const r = await c
    .aggregate([
      { $match: { qty: { $gte: 2 } } },
      {
        $group: {
          _id: '$item',
          total: { $sum: { $multiply: ['$qty', '$price'] } },
          n: { $sum: 1 },
          avgQty: { $avg: '$qty' },
          maxQty: { $max: '$qty' },
          minQty: { $min: '$qty' },
          days: { $push: '$day' },
          first: { $first: '$_id' },
        },
      },
      { $sort: { total: -1 } },
    ])
    .toArray();
  assert.deepEqual(r, [
    { _id: 'b', total: 80, n: 1, avgQty: 4, maxQty: 4, minQty: 4, days: [3], first: 5 },
    { _id: 'a', total: 70, n: 2, avgQty: 3.5, maxQty: 5, minQty: 2, days: [1, 2], first: 1 },
    { _id: 'c', total: 15, n: 1, avgQty: 3, maxQty: 3, minQty: 3, days: [2], first: 4 },
  ]);
});

test('aggregate $project with expressions, $skip, $limit, $count', async () => {
  const c = await seeded(SALES);
  const proj = await c
    .aggregate([
      { $sort: { _id: 1 } },
      { $project: { _id: 0, item: 1, value: { $multiply: ['$qty', '$price'] }, big: { $gt: ['$qty', 3] } } },
      { $skip: 1 },
      { $limit: 2 },
    ])
    .toArray();
  assert.deepEqual(proj, [
    { item: 'b', value: 20, big: false },
    { item: 'a', value: 50, big: true },
  ]);
  const cnt = await c.aggregate([{ $match: { item: 'a' } }, { $count: 'howMany' }]).toArray();
  assert.deepEqual(cnt, [{ howMany: 2 }]);
  const none = await c.aggregate([{ $match: { item: 'zzz' } }, { $count: 'n' }]).toArray();
  assert.deepEqual(none, []);
});

test('aggregate $group by null and compound _id', async () => {
  const c = await seeded(SALES);
  assert.deepEqual(await c.aggregate([{ $group: { _id: null, q: { $sum: '$qty' } } }]).toArray(), [{ _id: null, q: 15 }]);
  const r = await c
    .aggregate([{ $group: { _id: { d: '$day', i: '$item' }, q: { $sum: '$qty' } } }, { $sort: { '_id.d': 1, '_id.i': 1 } }])
    .toArray();
  assert.deepEqual(r.map((x) => [x._id.d, x._id.i, x.q]), [
    [1, 'a', 2],
    [1, 'b', 1],
    [2, 'a', 5],
    [2, 'c', 3],
    [3, 'b', 4],
  ]);
});

test('aggregate errors: unknown stage (40324), $group without _id (15955)', async () => {
  const c = await seeded(SALES);
  await expectServerError(c.aggregate([{ $foo: {} }]).toArray(), 40324);
  await expectServerError(c.aggregate([{ $group: { total: { $sum: 1 } } }]).toArray(), 15955);
});

test('aggregate on a missing collection returns no documents', async () => {
  const r = await ctx.db.collection('never_created_agg').aggregate([{ $match: {} }]).toArray();
  assert.deepEqual(r, []);
});

test('bulkWrite mixes operations and reports counts', async () => {
  const c = await seeded([{ _id: 1, n: 1 }, { _id: 2, n: 2 }]);
  const r = await c.bulkWrite([
    { insertOne: { document: { _id: 3, n: 3 } } },
    { updateOne: { filter: { _id: 1 }, update: { $set: { n: 10 } } } },
    { updateMany: { filter: { n: { $gte: 2 } }, update: { $inc: { n: 1 } } } },
    { replaceOne: { filter: { _id: 4 }, replacement: { n: 4 }, upsert: true } },
    { deleteOne: { filter: { _id: 2 } } },
  ]);
  assert.equal(r.insertedCount, 1);
  assert.equal(r.matchedCount, 4);
  assert.equal(r.modifiedCount, 4);
  assert.equal(r.upsertedCount, 1);
  assert.equal(r.deletedCount, 1);
  assert.deepEqual(r.upsertedIds, { 3: 4 });
  assert.deepEqual(await c.find({}, byId).toArray(), [
    { _id: 1, n: 11 },
    { _id: 3, n: 4 },
    { _id: 4, n: 4 },
  ]);
});
