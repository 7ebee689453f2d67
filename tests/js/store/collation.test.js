'use strict';
// Collation (ICU), as mongod applies it: every string comparison of an operation
// (query predicates, sorts, distinct, count, aggregation, update/delete filters)
// uses the operation's collation, else the collection's default; indexes with a
// collation key strings by ICU sort keys and serve only queries with the same
// collation when strings are compared; unique indexes judge duplicates by it.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const { useStore, expectServerError, CLIENT_DEFAULTS } = require('../lib/fixture');
const { startStore } = require('../lib/server');

const ctx = useStore({ dbName: 'collation_test' });

const CI = { locale: 'en', strength: 2 }; // case-insensitive
const NORMALIZED_CI = {
  locale: 'en',
  caseLevel: false,
  caseFirst: 'off',
  strength: 2,
  numericOrdering: false,
  alternate: 'non-ignorable',
  maxVariable: 'punct',
  normalization: false,
  backwards: false,
  version: '57.1',
};

async function seeded(values, prefix = 'c') {
  const c = ctx.coll(prefix);
  await c.insertMany(values.map((x, i) => ({ _id: i, x })));
  return c;
}
const xs = (docs) => docs.map((d) => d.x);

/** Every stage of an explain's winning plan, outermost first. */
function stages(explain) {
  const out = [];
  let s = explain.queryPlanner.winningPlan;
  while (s) {
    out.push(s);
    s = s.inputStage;
  }
  return out;
}
const ixscan = (explain) => stages(explain).find((s) => s.stage === 'IXSCAN');

test('strength 2 makes find, count and distinct case-insensitive', async () => {
  const c = await seeded(['a', 'A', 'b', 'B', 'á']);
  assert.deepEqual(xs(await c.find({ x: 'a' }).toArray()), ['a']);
  assert.deepEqual(xs(await c.find({ x: 'a' }).collation(CI).sort({ _id: 1 }).toArray()), ['a', 'A']);
  assert.deepEqual(xs(await c.find({ x: { $in: ['B', 'z'] } }).collation(CI).sort({ _id: 1 }).toArray()), ['b', 'B']);
  assert.deepEqual(xs(await c.find({ x: { $ne: 'A' } }).collation(CI).sort({ _id: 1 }).toArray()), ['b', 'B', 'á']);
  assert.deepEqual(xs(await c.find({ x: { $nin: ['a', 'b'] } }).collation(CI).toArray()), ['á']);
  assert.equal(await c.countDocuments({ x: 'B' }, { collation: CI }), 2);
  const r = await ctx.db.command({ count: c.collectionName, query: { x: 'A' }, collation: CI });
  assert.equal(r.n, 2);
  assert.deepEqual(await c.distinct('x', {}, { collation: CI }), ['a', 'b', 'á']);
  assert.deepEqual((await c.distinct('x')).length, 5);
  // Strength 1 also ignores accents.
  assert.deepEqual(xs(await c.find({ x: 'a' }).collation({ locale: 'en', strength: 1 }).toArray()), ['a', 'A', 'á']);
});

test('comparisons and equality inside arrays and documents use the collation', async () => {
  const c = ctx.coll();
  await c.insertMany([
    { _id: 1, tags: ['Red', 'Green'], sub: { name: 'Bob' } },
    { _id: 2, tags: ['blue'], sub: { name: 'alice' } },
  ]);
  assert.deepEqual((await c.find({ tags: 'red' }).collation(CI).toArray()).map((d) => d._id), [1]);
  assert.deepEqual((await c.find({ sub: { name: 'BOB' } }).collation(CI).toArray()).map((d) => d._id), [1]);
  assert.deepEqual((await c.find({ tags: ['BLUE'] }).collation(CI).toArray()).map((d) => d._id), [2]);
  assert.deepEqual((await c.find({ 'sub.name': { $gte: 'b' } }).collation(CI).toArray()).map((d) => d._id), [1]);
  assert.deepEqual((await c.find({ 'sub.name': { $gte: 'b' } }).toArray()).map((d) => d._id), []);
  assert.deepEqual((await c.find({ tags: { $all: ['GREEN', 'red'] } }).collation(CI).toArray()).map((d) => d._id), [1]);
  assert.deepEqual((await c.find({ $expr: { $eq: ['$sub.name', 'ALICE'] } }).collation(CI).toArray()).map((d) => d._id), [2]);
  const proj = await c.find({ _id: 1 }, { projection: { tags: { $elemMatch: { $eq: 'GREEN' } }, same: { $eq: ['$sub.name', 'BOB'] } } }).collation(CI).toArray();
  assert.deepEqual(proj, [{ _id: 1, tags: ['Green'], same: true }]);
});

test('update, delete, findAndModify and bulkWrite filters use the collation', async () => {
  const c = await seeded(['a', 'A', 'b', 'B', 'c']);
  const u = await c.updateMany({ x: 'b' }, { $set: { hit: true } }, { collation: CI });
  assert.equal(u.matchedCount, 2);
  assert.equal(u.modifiedCount, 2);
  const one = await c.updateOne({ x: 'C' }, { $set: { hit: true } }, { collation: CI });
  assert.equal(one.matchedCount, 1);
  const none = await c.updateOne({ x: 'C' }, { $set: { other: true } });
  assert.equal(none.matchedCount, 0);
  const fam = await c.findOneAndUpdate({ x: 'A' }, { $set: { y: 1 } }, { collation: CI, sort: { _id: -1 }, returnDocument: 'after' });
  assert.deepEqual(fam, { _id: 1, x: 'A', y: 1 });
  const removed = await c.findOneAndDelete({ x: 'B' }, { collation: CI, sort: { _id: 1 } });
  assert.equal(removed.x, 'b');
  const bulk = await c.bulkWrite([
    { updateMany: { filter: { x: 'B' }, update: { $set: { z: 1 } }, collation: CI } },
    { deleteMany: { filter: { x: 'a' }, collation: CI } },
  ]);
  assert.equal(bulk.matchedCount, 1);
  assert.equal(bulk.deletedCount, 2);
  const d = await c.deleteMany({ x: 'c' }, { collation: CI });
  assert.equal(d.deletedCount, 1);
  assert.deepEqual(await c.find().toArray(), [{ _id: 3, x: 'B', hit: true, z: 1 }]);
});

test('update operators and arrayFilters compare strings under the collation', async () => {
  const c = ctx.coll();
  await c.insertOne({ _id: 1, tags: ['Red', 'green'], best: 'M', items: [{ n: 'A', q: 1 }, { n: 'b', q: 2 }] });
  await c.updateOne({ _id: 1 }, { $addToSet: { tags: { $each: ['RED', 'Blue', 'blue'] } } }, { collation: CI });
  assert.deepEqual((await c.findOne({ _id: 1 })).tags, ['Red', 'green', 'Blue']);
  await c.updateOne({ _id: 1 }, { $pull: { tags: 'GREEN' } }, { collation: CI });
  assert.deepEqual((await c.findOne({ _id: 1 })).tags, ['Red', 'Blue']);
  await c.updateOne({ _id: 1 }, { $pullAll: { tags: ['red'] } }, { collation: CI });
  assert.deepEqual((await c.findOne({ _id: 1 })).tags, ['Blue']);
  await c.updateOne({ _id: 1 }, { $pull: { tags: 'blue' } });
  assert.deepEqual((await c.findOne({ _id: 1 })).tags, ['Blue'], 'binary $pull keeps "Blue"');
  // $max: "n" > "M" under both; "m" equals "M" case-insensitively, so nothing changes.
  const same = await c.updateOne({ _id: 1 }, { $max: { best: 'm' } }, { collation: CI });
  assert.equal(same.modifiedCount, 0);
  await c.updateOne({ _id: 1 }, { $max: { best: 'm' } });
  assert.equal((await c.findOne({ _id: 1 })).best, 'm');
  await c.updateOne({ _id: 1 }, { $push: { items: { $each: [{ n: 'C', q: 3 }], $sort: { n: 1 } } } }, { collation: CI });
  assert.deepEqual((await c.findOne({ _id: 1 })).items.map((i) => i.n), ['A', 'b', 'C']);
  await c.updateOne({ _id: 1 }, { $set: { 'items.$[e].q': 0 } }, { collation: CI, arrayFilters: [{ 'e.n': 'a' }] });
  assert.deepEqual((await c.findOne({ _id: 1 })).items.map((i) => i.q), [0, 2, 3]);
});

test('aggregate: $match, $sort, $group keys and expressions use the collation', async () => {
  const c = await seeded(['b', 'A', 'a', 'B', '10', '9']);
  const m = await c.aggregate([{ $match: { x: 'a' } }, { $sort: { _id: 1 } }], { collation: CI }).toArray();
  assert.deepEqual(xs(m), ['A', 'a']);
  const g = await c.aggregate([{ $group: { _id: '$x', n: { $sum: 1 } } }, { $sort: { _id: 1 } }], { collation: CI }).toArray();
  assert.deepEqual(g.map((x) => [x._id.toLowerCase(), x.n]), [['10', 1], ['9', 1], ['a', 2], ['b', 2]]);
  const e = await c.aggregate([{ $project: { _id: 0, eq: { $eq: ['$x', 'A'] } } }], { collation: CI }).toArray();
  assert.deepEqual(e.map((x) => x.eq), [false, true, true, false, false, false]);
  const sorted = await c.aggregate([{ $sort: { x: 1, _id: 1 } }, { $project: { _id: 0, x: 1 } }], { collation: { locale: 'en', numericOrdering: true } }).toArray();
  assert.deepEqual(xs(sorted), ['9', '10', 'a', 'A', 'b', 'B']);
  const max = await c.aggregate([{ $match: { x: { $in: ['a', 'B'] } } }, { $group: { _id: null, m: { $max: '$x' }, s: { $addToSet: '$x' } } }], { collation: CI }).toArray();
  assert.equal(max[0].m.toLowerCase(), 'b');
  assert.equal(max[0].s.length, 2);
  const n = await c.aggregate([{ $match: { x: 'B' } }, { $count: 'n' }], { collation: CI }).toArray();
  assert.deepEqual(n, [{ n: 2 }]);
  const foreign = await seeded(['A', 'x'], 'foreign');
  const joined = await c
    .aggregate([{ $match: { _id: 2 } }, { $lookup: { from: foreign.collectionName, localField: 'x', foreignField: 'x', as: 'f' } }], { collation: CI })
    .toArray();
  assert.deepEqual(joined[0].f, [{ _id: 0, x: 'A' }]);
  const buckets = await c
    .aggregate([{ $match: { x: { $in: ['a', 'b'] } } }, { $bucket: { groupBy: '$x', boundaries: ['a', 'B', 'c'] } }], { collation: CI })
    .toArray();
  assert.deepEqual(buckets, [{ _id: 'a', count: 2 }, { _id: 'B', count: 2 }]);
});

test('numericOrdering sorts "10" after "9" and compares digits as numbers', async () => {
  const c = await seeded(['10', '9', '2', '100']);
  assert.deepEqual(xs(await c.find().sort({ x: 1 }).toArray()), ['10', '100', '2', '9']);
  const num = { locale: 'en', numericOrdering: true };
  assert.deepEqual(xs(await c.find().sort({ x: 1 }).collation(num).toArray()), ['2', '9', '10', '100']);
  assert.deepEqual(xs(await c.find({ x: { $lt: '10' } }).sort({ x: 1 }).collation(num).toArray()), ['2', '9']);
});

test('caseFirst, caseLevel, alternate, maxVariable and backwards', async () => {
  const c = await seeded(['b', 'B', 'a', 'A']);
  assert.deepEqual(xs(await c.find().sort({ x: 1 }).collation({ locale: 'en' }).toArray()), ['a', 'A', 'b', 'B']);
  assert.deepEqual(xs(await c.find().sort({ x: 1 }).collation({ locale: 'en', caseFirst: 'upper' }).toArray()), ['A', 'a', 'B', 'b']);
  const lvl = await seeded(['a', 'A', 'á']);
  assert.deepEqual(xs(await lvl.find({ x: 'a' }).sort({ _id: 1 }).collation({ locale: 'en', strength: 1, caseLevel: true }).toArray()), ['a', 'á']);

  const p = await seeded(['ab', 'a b', 'a-b', 'a*b']);
  const shifted = { locale: 'en', alternate: 'shifted' };
  assert.deepEqual(xs(await p.find({ x: 'ab' }).sort({ _id: 1 }).collation(shifted).toArray()), ['ab', 'a b', 'a-b', 'a*b']);
  assert.deepEqual(xs(await p.find({ x: 'ab' }).sort({ _id: 1 }).collation({ ...shifted, maxVariable: 'space' }).toArray()), ['ab', 'a b']);
  assert.deepEqual(xs(await p.find({ x: 'ab' }).collation({ locale: 'en' }).toArray()), ['ab']);

  const fr = await seeded(['côté', 'cote', 'coté', 'côte']);
  assert.deepEqual(xs(await fr.find().sort({ x: 1 }).collation({ locale: 'fr' }).toArray()), ['cote', 'coté', 'côte', 'côté']);
  assert.deepEqual(xs(await fr.find().sort({ x: 1 }).collation({ locale: 'fr', backwards: true }).toArray()), ['cote', 'côte', 'coté', 'côté']);
});

test('invalid collations fail with mongod codes', async () => {
  const c = await seeded(['a']);
  const find = (collation) => c.find({}).collation(collation).toArray();
  let e = await expectServerError(find({ locale: 'xx' }), 2, 'BadValue');
  assert.match(e.message, /Field 'locale' is invalid in: \{ locale: "xx" \}/);
  e = await expectServerError(find({ locale: 'en_XX' }), 2);
  assert.match(e.message, /Did you mean 'en'\?/);
  await expectServerError(find({ locale: '' }), 2);
  await expectServerError(find({ strength: 2 }), 4, 'NoSuchKey');
  await expectServerError(find({ locale: 1 }), 14, 'TypeMismatch');
  e = await expectServerError(find({ locale: 'en', strength: 6 }), 9, 'FailedToParse');
  assert.match(e.message, /Field 'strength' must be an integer 1 through 5/);
  e = await expectServerError(find({ locale: 'en', bogus: 1 }), 9);
  assert.match(e.message, /Collation spec contains unknown field/);
  await expectServerError(find({ locale: 'en', caseFirst: 'middle' }), 9);
  await expectServerError(find({ locale: 'en', alternate: 'x' }), 9);
  await expectServerError(find({ locale: 'en', maxVariable: 'x' }), 9);
  await expectServerError(find({ locale: 'en', caseLevel: 1 }), 14);
  await expectServerError(find({ locale: 'simple', strength: 2 }), 9);
  await expectServerError(find({ locale: 'en', strength: 1, backwards: true }), 2);
  await expectServerError(find({ locale: 'en', strength: 2, caseFirst: 'upper' }), 2);
  await expectServerError(find({ locale: 'en', version: '1.0' }), 254, 'IncompatibleCollationVersion');
  await expectServerError(ctx.db.command({ find: c.collectionName, collation: 'en' }), 14);
  await expectServerError(c.aggregate([], { collation: { locale: 'xx' } }).toArray(), 2);
  await expectServerError(c.updateOne({}, { $set: { a: 1 } }, { collation: { locale: 'xx' } }), 2);
  await expectServerError(c.deleteOne({}, { collation: { locale: 'en', strength: 0 } }), 9);
  await expectServerError(c.countDocuments({}, { collation: { locale: 'xx' } }), 2);
  await expectServerError(ctx.db.createCollection(ctx.collName(), { collation: { locale: 'xx' } }), 2);
  await expectServerError(c.createIndex({ x: 1 }, { collation: { locale: 'xx' } }), 2);
  // Valid specs with every field, and a matching version, are accepted.
  assert.equal((await find({ ...NORMALIZED_CI })).length, 1);
  assert.equal((await find({ locale: 'simple' })).length, 1);
});

test('collection default collation: used without a collation, overridden by simple, inherited by indexes', async () => {
  const name = ctx.collName('dflt');
  await ctx.db.createCollection(name, { collation: CI });
  const c = ctx.db.collection(name);
  await c.insertMany([{ _id: 1, x: 'a' }, { _id: 2, x: 'A' }, { _id: 3, x: 'b' }]);
  const info = (await ctx.db.listCollections({ name }).toArray())[0];
  assert.deepEqual(info.options.collation, NORMALIZED_CI);
  assert.deepEqual(info.idIndex.collation, NORMALIZED_CI);
  assert.equal((await c.find({ x: 'a' }).toArray()).length, 2);
  assert.equal(await c.countDocuments({ x: 'B' }), 1);
  assert.equal((await c.find({ x: 'a' }).collation({ locale: 'simple' }).toArray()).length, 1);
  assert.deepEqual(xs(await c.find().sort({ x: -1, _id: 1 }).toArray()), ['b', 'a', 'A']);
  const u = await c.updateMany({ x: 'A' }, { $set: { y: 1 } });
  assert.equal(u.matchedCount, 2);
  assert.deepEqual(await c.distinct('x'), ['a', 'b']);

  await c.createIndex({ x: 1 }, { name: 'x_inherits' });
  await c.createIndex({ y: 1 }, { name: 'y_simple', collation: { locale: 'simple' } });
  const idx = await c.listIndexes().toArray();
  assert.deepEqual(idx.find((i) => i.name === 'x_inherits').collation, NORMALIZED_CI);
  assert.deepEqual(idx.find((i) => i.name === '_id_').collation, NORMALIZED_CI);
  assert.equal(idx.find((i) => i.name === 'y_simple').collation, undefined);
  assert.equal(ixscan(await c.find({ x: 'A' }).explain()).indexName, 'x_inherits');
  assert.equal((await c.find({ x: 'A' }).hint('x_inherits').toArray()).length, 2);

  // The validator compares under the collection's default collation.
  const v = ctx.db.collection(ctx.collName('dflt_validator'));
  await ctx.db.createCollection(v.collectionName, { collation: CI, validator: { status: { $in: ['active', 'done'] } } });
  await v.insertOne({ status: 'ACTIVE' });
  await expectServerError(v.insertOne({ status: 'other' }), 121);

  // String _id values are unique under the default collation, as in mongod.
  const ids = ctx.db.collection(ctx.collName('dflt_ids'));
  await ctx.db.createCollection(ids.collectionName, { collation: CI });
  await ids.insertOne({ _id: 'key' });
  await expectServerError(ids.insertOne({ _id: 'KEY' }), 11000);
  assert.deepEqual(await ids.findOne({ _id: 'KEY' }), { _id: 'key' });
});

test('an index with a collation serves only queries with that collation when strings are compared', async () => {
  const c = await seeded(['a', 'A', 'b', 'B', 'c']);
  await c.insertOne({ _id: 10, x: 5 });
  await c.createIndex({ x: 1 }, { name: 'x_ci', collation: CI });
  const spec = (await c.listIndexes().toArray()).find((i) => i.name === 'x_ci');
  assert.deepEqual(spec.collation, NORMALIZED_CI);

  const withCi = await c.find({ x: 'a' }).collation(CI).explain();
  assert.equal(ixscan(withCi).indexName, 'x_ci');
  assert.deepEqual(ixscan(withCi).collation, NORMALIZED_CI);
  assert.deepEqual(xs(await c.find({ x: 'a' }).collation(CI).sort({ _id: 1 }).toArray()), ['a', 'A']);
  assert.deepEqual(xs(await c.find({ x: { $gte: 'B' } }).collation(CI).sort({ _id: 1 }).toArray()), ['b', 'B', 'c']);
  assert.deepEqual(xs(await c.find({ x: { $in: ['C', 'A'] } }).collation(CI).sort({ _id: 1 }).toArray()), ['a', 'A', 'c']);

  // Simple collation: the string predicate cannot use the case-insensitive index.
  const simple = await c.find({ x: 'a' }).explain();
  assert.equal(ixscan(simple), undefined);
  assert.deepEqual(xs(await c.find({ x: 'a' }).toArray()), ['a']);
  // ... but a predicate without strings can.
  const numeric = await c.find({ x: 5 }).explain();
  assert.equal(ixscan(numeric).indexName, 'x_ci');
  assert.deepEqual(xs(await c.find({ x: 5 }).toArray()), [5]);
  // A different collation does not use it for strings either.
  assert.equal(ixscan(await c.find({ x: 'a' }).collation({ locale: 'fr', strength: 2 }).explain()), undefined);

  // The index provides the sort only under its own collation.
  const sortCi = await c.find({ x: { $type: 'string' } }).sort({ x: 1 }).collation(CI).explain();
  assert.ok(!stages(sortCi).some((s) => s.stage === 'SORT'), 'no blocking sort with the index collation');
  const sortSimple = await c.find({}).sort({ x: 1 }).explain();
  assert.ok(stages(sortSimple).some((s) => s.stage === 'SORT'), 'blocking sort under the simple collation');
  assert.deepEqual(xs(await c.find({ x: { $type: 'string' } }).sort({ x: 1, _id: 1 }).collation(CI).toArray()), ['a', 'A', 'b', 'B', 'c']);

  // Two indexes on the same key with different collations may coexist.
  await c.createIndex({ x: 1 }, { name: 'x_simple' });
  assert.equal(ixscan(await c.find({ x: 'a' }).explain()).indexName, 'x_simple');
  assert.equal(ixscan(await c.find({ x: 'a' }).collation(CI).explain()).indexName, 'x_ci');

  // Deletes and updates go through the index and keep it consistent.
  const del = await c.deleteMany({ x: 'B' }, { collation: CI });
  assert.equal(del.deletedCount, 2);
  await c.updateOne({ x: 'c' }, { $set: { x: 'D' } }, { collation: CI });
  assert.deepEqual(xs(await c.find({ x: 'd' }).collation(CI).toArray()), ['D']);
  assert.deepEqual(xs(await c.find({ x: 'c' }).collation(CI).toArray()), []);
});

test('a unique index with strength 2 treats "A" and "a" as duplicates', async () => {
  const c = ctx.coll('uniq');
  await c.createIndex({ name: 1 }, { unique: true, collation: CI });
  await c.insertOne({ name: 'Alice' });
  const e = await expectServerError(c.insertOne({ name: 'alice' }), 11000);
  assert.match(e.message, /duplicate key/);
  await c.insertOne({ name: 'Álice' }); // accents differ at strength 2
  await c.insertOne({ name: 'bob' });
  await expectServerError(c.updateOne({ name: 'bob' }, { $set: { name: 'ALICE' } }), 11000);
  assert.equal(await c.countDocuments(), 3);
  // A partial filter is evaluated under the index's collation.
  const p = ctx.coll('uniq_partial');
  await p.createIndex({ email: 1 }, { unique: true, collation: CI, partialFilterExpression: { kind: 'user' } });
  await p.insertOne({ email: 'a@x', kind: 'USER' });
  await expectServerError(p.insertOne({ email: 'A@X', kind: 'user' }), 11000);
  await p.insertOne({ email: 'A@X', kind: 'bot' });
  // Building a unique index over existing case variants fails.
  const d = await seeded(['x', 'X'], 'uniq_build');
  await expectServerError(d.createIndex({ x: 1 }, { unique: true, collation: CI }), 11000);
  await d.createIndex({ x: 1 }, { unique: true });
});

test('default and index collations survive a restart', async () => {
  const server = await startStore();
  const run = async (fn) => {
    const client = new MongoClient(server.uri(), CLIENT_DEFAULTS);
    try {
      await client.connect();
      return await fn(client.db('collation_restart'));
    } finally {
      await client.close();
    }
  };
  try {
    await run(async (db) => {
      await db.createCollection('c', { collation: CI });
      const c = db.collection('c');
      await c.createIndex({ name: 1 }, { unique: true });
      await c.createIndex({ n: 1 }, { name: 'n_num', collation: { locale: 'en', numericOrdering: true } });
      await c.insertMany([{ _id: 'k1', name: 'Ann', n: '10' }, { _id: 'k2', name: 'bob', n: '9' }]);
    });
    const info = await server.stop();
    assert.equal(info.code, 0);
    await server.start();
    await run(async (db) => {
      const c = db.collection('c');
      const info = (await db.listCollections({ name: 'c' }).toArray())[0];
      assert.deepEqual(info.options.collation, NORMALIZED_CI);
      assert.deepEqual((await c.find({ name: 'ANN' }).toArray()).map((d) => d._id), ['k1']);
      await expectServerError(c.insertOne({ _id: 'k3', name: 'BOB' }), 11000);
      await expectServerError(c.insertOne({ _id: 'K1', name: 'x' }), 11000);
      const num = { locale: 'en', numericOrdering: true };
      const e = await c.find({ n: { $gt: '9' } }).collation(num).explain();
      assert.equal(ixscan(e).indexName, 'n_num');
      assert.deepEqual((await c.find({ n: { $gt: '9' } }).collation(num).toArray()).map((d) => d._id), ['k1']);
      assert.deepEqual((await c.find().sort({ n: 1 }).collation(num).toArray()).map((d) => d.n), ['9', '10']);
    });
  } finally {
    await server.cleanup();
  }
});
