'use strict';
// Cursors across many batches, getMore, killCursors and CursorNotFound.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { Long } = require('mongodb');
const { useStore, expectServerError } = require('../lib/fixture');

const N = 1000;
let big; // collection with N docs {_id: i, v: N - i, pad}

const ctx = useStore({
  dbName: 'cursor_test',
  setup: async (c) => {
    big = c.db.collection('big');
    const docs = Array.from({ length: N }, (_, i) => ({ _id: i, v: N - i, pad: 'p'.repeat(50) }));
    await big.insertMany(docs);
  },
});

test('find over 1000 docs with batchSize 7 returns every document once, in batches of 7', async () => {
  const mark = ctx.events.length;
  const seen = [];
  for await (const d of big.find({}, { batchSize: 7, sort: { _id: 1 } })) seen.push(d._id);
  assert.equal(seen.length, N);
  assert.deepEqual(seen, Array.from({ length: N }, (_, i) => i));
  const gm = ctx.succeeded('getMore', mark);
  // First batch 7 from find, then ceil((1000 - 7) / 7) = 142 getMores.
  assert.equal(gm.length, 142, `getMore count ${gm.length}`);
  for (const e of gm.slice(0, -1)) {
    assert.equal(e.reply.cursor.nextBatch.length, 7);
    assert.notEqual(Number(e.reply.cursor.id), 0);
  }
  const last = gm.at(-1).reply.cursor;
  assert.equal(last.nextBatch.length, 6);
  assert.equal(Number(last.id), 0, 'cursor id 0 once exhausted');
  const findReply = ctx.succeeded('find', mark).at(-1).reply.cursor;
  assert.equal(findReply.firstBatch.length, 7);
  assert.equal(findReply.ns, 'cursor_test.big');
});

test('sorted iteration across batches is in order (descending on a non-_id field)', async () => {
  const vs = [];
  for await (const d of big.find({ v: { $gt: 100 } }, { batchSize: 13, sort: { v: -1 }, projection: { v: 1, _id: 0 } })) {
    vs.push(d.v);
  }
  assert.equal(vs.length, N - 100);
  for (let i = 1; i < vs.length; i++) assert.ok(vs[i - 1] > vs[i], `order broken at ${i}`);
  assert.equal(vs[0], N);
});

test('limit combined with batchSize stops at the limit', async () => {
  const docs = await big.find({}, { batchSize: 7, limit: 20, sort: { _id: 1 } }).toArray();
  assert.deepEqual(
    docs.map((d) => d._id),
    Array.from({ length: 20 }, (_, i) => i),
  );
});

test('aggregate cursor across batches', async () => {
  const mark = ctx.events.length;
  const out = await big.aggregate([{ $match: { _id: { $lt: 500 } } }, { $project: { _id: 1 } }], { batchSize: 11 }).toArray();
  assert.equal(out.length, 500);
  assert.equal(new Set(out.map((d) => d._id)).size, 500);
  assert.ok(ctx.succeeded('getMore', mark).length >= 45, 'aggregate results came over many getMores');
});

test('cursor.close() sends killCursors; a later getMore fails with CursorNotFound (43)', async () => {
  const mark = ctx.events.length;
  const cursor = big.find({}, { batchSize: 5 });
  await cursor.next(); // opens the cursor with a first batch of 5
  const id = cursor.id;
  assert.ok(id && !id.isZero(), 'server cursor stays open after first batch');
  await cursor.close();
  const kc = ctx.succeeded('killCursors', mark);
  assert.equal(kc.length, 1, 'driver sent killCursors');
  assert.deepEqual(
    kc[0].reply.cursorsKilled.map((x) => x.toString()),
    [id.toString()],
  );
  await expectServerError(ctx.db.command({ getMore: Long.fromValue(id), collection: 'big' }), 43, 'CursorNotFound');
});

test('getMore on an exhausted cursor id fails with CursorNotFound (43)', async () => {
  const r = await ctx.db.command({ find: 'big', filter: {}, batchSize: 990 });
  const id = r.cursor.id;
  assert.notEqual(Number(id), 0);
  const gm = await ctx.db.command({ getMore: Long.fromValue(id), collection: 'big', batchSize: 100 });
  assert.equal(gm.cursor.nextBatch.length, 10);
  assert.equal(Number(gm.cursor.id), 0);
  await expectServerError(ctx.db.command({ getMore: Long.fromValue(id), collection: 'big' }), 43);
});

test('raw find/getMore: batchSize honoured, ns and id fields present', async () => {
  const r = await ctx.db.command({ find: 'big', filter: { _id: { $lt: 30 } }, sort: { _id: 1 }, batchSize: 10 });
  assert.equal(r.cursor.ns, 'cursor_test.big');
  assert.equal(r.cursor.firstBatch.length, 10);
  const ids = r.cursor.firstBatch.map((d) => d._id);
  let id = r.cursor.id;
  while (Number(id) !== 0) {
    const g = await ctx.db.command({ getMore: Long.fromValue(id), collection: 'big', batchSize: 10 });
    assert.equal(g.cursor.ns, 'cursor_test.big');
    assert.ok(g.cursor.nextBatch.length <= 10);
    ids.push(...g.cursor.nextBatch.map((d) => d._id));
    id = g.cursor.id;
  }
  assert.deepEqual(ids, Array.from({ length: 30 }, (_, i) => i));
});

test('batchSize 0 opens a cursor with an empty first batch', async () => {
  const r = await ctx.db.command({ find: 'big', filter: {}, batchSize: 0 });
  assert.equal(r.cursor.firstBatch.length, 0);
  assert.notEqual(Number(r.cursor.id), 0);
  const g = await ctx.db.command({ getMore: Long.fromValue(r.cursor.id), collection: 'big', batchSize: 3 });
  assert.deepEqual(
    g.cursor.nextBatch.map((d) => d._id),
    [0, 1, 2],
  );
  await ctx.db.command({ killCursors: 'big', cursors: [Long.fromValue(r.cursor.id)] });
});

test('killCursors reports killed and not-found ids', async () => {
  const r = await ctx.db.command({ find: 'big', filter: {}, batchSize: 2 });
  const bogus = Long.fromString('123456789');
  const k = await ctx.db.command({ killCursors: 'big', cursors: [Long.fromValue(r.cursor.id), bogus] });
  assert.equal(k.ok, 1);
  assert.deepEqual(
    k.cursorsKilled.map(String),
    [String(r.cursor.id)],
  );
  assert.deepEqual(k.cursorsNotFound.map(String), ['123456789']);
});

test('a small result closes the cursor in the first batch (id 0)', async () => {
  const r = await ctx.db.command({ find: 'big', filter: { _id: { $lt: 3 } } });
  assert.equal(r.cursor.firstBatch.length, 3);
  assert.equal(Number(r.cursor.id), 0);
});

test('default first batch is 101 documents', async () => {
  const r = await ctx.db.command({ find: 'big', filter: {} });
  assert.equal(r.cursor.firstBatch.length, 101);
  await ctx.db.command({ killCursors: 'big', cursors: [Long.fromValue(r.cursor.id)] });
});

test('documents inserted while a cursor is open do not break it', async () => {
  const c = ctx.coll();
  await c.insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: i })));
  const cursor = c.find({}, { batchSize: 10, sort: { _id: 1 } });
  const got = [];
  got.push((await cursor.next())._id);
  await c.insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: 1000 + i })));
  for await (const d of cursor) got.push(d._id);
  // The first 50 are all there exactly once; later inserts may or may not be seen.
  const firstFifty = got.filter((x) => x < 50);
  assert.deepEqual(firstFifty, Array.from({ length: 50 }, (_, i) => i));
  assert.equal(new Set(got).size, got.length, 'no duplicates');
});

test('many open cursors at once, interleaved', async () => {
  const cursors = Array.from({ length: 20 }, (_, k) => big.find({ _id: { $gte: k * 10, $lt: k * 10 + 10 } }, { batchSize: 3, sort: { _id: 1 } }));
  const results = cursors.map(() => []);
  let active = true;
  while (active) {
    active = false;
    for (let k = 0; k < cursors.length; k++) {
      if (await cursors[k].hasNext()) {
        results[k].push((await cursors[k].next())._id);
        active = true;
      }
    }
  }
  results.forEach((r, k) => assert.deepEqual(r, Array.from({ length: 10 }, (_, i) => k * 10 + i)));
});

test('a batch holds at most 16 MB of documents, as on mongod: the document that would cross it opens the next batch', async () => {
  const coll = ctx.db.collection('mb');
  const pad = 'm'.repeat(1_000_000);
  // 40 documents of about 1 MB: 16 fit in 16 MiB (16,777,216 bytes), 17 do not.
  for (let i = 0; i < 40; i += 10) {
    await coll.insertMany(Array.from({ length: 10 }, (_, k) => ({ _id: i + k, pad })));
  }
  const first = await ctx.db.command({ find: 'mb', sort: { _id: 1 }, batchSize: 1000 });
  assert.equal(first.cursor.firstBatch.length, 16);
  const ids = first.cursor.firstBatch.map((d) => d._id);
  let id = first.cursor.id;
  while (Number(id) !== 0) {
    const more = await ctx.db.command({ getMore: id, collection: 'mb', batchSize: 1000 });
    assert.ok(more.cursor.nextBatch.length <= 16, `a batch of ${more.cursor.nextBatch.length} documents`);
    ids.push(...more.cursor.nextBatch.map((d) => d._id));
    id = more.cursor.id;
  }
  assert.deepEqual(ids, Array.from({ length: 40 }, (_, i) => i));
  // A driver's cursor reads all of them, the held document included exactly once.
  assert.equal((await coll.find({}).toArray()).length, 40);
  await coll.drop();
});
