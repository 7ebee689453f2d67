'use strict';
// Merged reads (docs/CONSISTENCY.md, Merged reads): a find with a limit that must look at
// the archive answers from both tiers without waiting for the feeder. Here the feeder
// never runs (workers disabled), so the archive never learns the writes made through the
// proxy: every answer that includes them, and none that resurrects a deleted or
// regresses an updated document, comes from the merge. A model of the collection gives
// the expected answer of each of many random finds (filter, sort, skip, limit,
// projection) after random inserts, updates (of archive-only and fast documents) and
// deletes, and of `count` and `distinct` commands; finds and aggregations the proxy cannot
// merge still wait and give up with 262.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Long } = require('mongodb');
const { startTiered, show } = require('../lib/tiered');
const { expectServerError } = require('../lib/fixture');

const NS = 'shop.orders';
const OLD = new Date(Date.now() - 400 * 86_400_000);
let t;
let orders;
const model = new Map();

// A deterministic generator, so a failure can be replayed.
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}
const rand = rng(20261203);
const pick = (n) => Math.floor(rand() * n);

before(async () => {
  // Cold writes off: every write lands in the fast tier, so the archive never sees one and
  // every answer that includes a write comes from the merge (cold_writes.test.js covers them).
  t = await startTiered({
    collections: [NS], horizon: '10m', workers: false, causalWaitTimeout: '1s', startProxy: false,
    extra: { tiering: { coldWrites: false } },
  });
  const archive = await t.tierClient('archive');
  const docs = [];
  for (let i = 0; i < 120; i++) {
    const d = { _id: i, date: new Date(OLD.getTime() + i * 1000), kind: i % 3, n: pick(1000), tags: [i % 5] };
    docs.push(d);
    model.set(i, d);
  }
  await archive.db('shop').collection('orders').insertMany(docs);
  await t.startProxy();
  orders = (await t.client({ retryReads: false })).db('shop').collection('orders');
});

after(async () => {
  if (t) await t.cleanup();
});

/** The model's answer: filter by kind (and n range), sort by {n, _id}, skip, limit. */
function expected({ kind, nBelow, sortDir, skip, limit }) {
  const rows = [...model.values()].filter((d) => d.kind === kind && (nBelow === undefined || d.n < nBelow));
  rows.sort((a, b) => (a.n - b.n || a._id - b._id) * sortDir);
  return rows.slice(skip, skip + limit).map((d) => ({ _id: d._id, n: d.n }));
}

test('random writes through the proxy, then finds merged from both tiers equal the model, with no feeder', { timeout: 300_000 }, async () => {
  let nextId = 1000;
  for (let round = 0; round < 8; round++) {
    for (let i = 0; i < 25; i++) {
      const ids = [...model.keys()];
      const op = pick(10);
      if (op < 3) {
        const d = { _id: nextId++, date: new Date(), kind: pick(3), n: pick(1000), tags: [pick(5)] };
        await orders.insertOne(d);
        model.set(d._id, d);
      } else if (op < 8) {
        // Updates of archive-only documents promote them; kind and n may change so
        // the archive's (stale) version matches where the new one does not, and back.
        const id = ids[pick(ids.length)];
        const set = { n: pick(1000) };
        if (pick(2)) set.kind = pick(3);
        await orders.updateOne({ _id: id }, { $set: set });
        Object.assign(model.get(id), set);
      } else {
        const id = ids[pick(ids.length)];
        await orders.deleteOne({ _id: id });
        model.delete(id);
      }
    }
    for (let q = 0; q < 12; q++) {
      const spec = {
        kind: pick(3),
        nBelow: pick(2) ? undefined : pick(1000),
        sortDir: pick(2) ? 1 : -1,
        skip: pick(3) * pick(8),
        limit: 1 + pick(30),
      };
      const filter = { kind: spec.kind };
      if (spec.nBelow !== undefined) filter.n = { $lt: spec.nBelow };
      const got = await orders
        .find(filter, { projection: { _id: 1, n: 1 } })
        .sort({ n: spec.sortDir, _id: spec.sortDir })
        .skip(spec.skip)
        .limit(spec.limit)
        .toArray();
      assert.deepEqual(got, expected(spec), `round ${round}, query ${show(spec)}`);
    }
  }
  const s = await t.status();
  const routing = s.coll(NS).routing;
  assert.ok(routing.merged >= 8 * 12, show(routing));
  // The archive never saw a write: the answers above came from the merge.
  assert.deepEqual((await t.tierDocs('archive', NS)).length, 120);
});

test('a count command is merged too: it equals the model with no feeder, skip and limit applied', async () => {
  const shop = (await t.client({ retryReads: false })).db('shop');
  for (const kind of [0, 1, 2]) {
    const want = [...model.values()].filter((d) => d.kind === kind).length;
    assert.equal((await shop.command({ count: 'orders', query: { kind } })).n, want, `kind ${kind}`);
    assert.equal((await shop.command({ count: 'orders', query: { kind }, skip: 3, limit: 5 })).n, Math.min(5, Math.max(0, want - 3)));
    const below = [...model.values()].filter((d) => d.kind === kind && d.n < 500).length;
    assert.equal((await shop.command({ count: 'orders', query: { kind, n: { $lt: 500 } } })).n, below);
  }
  assert.equal((await shop.command({ count: 'orders' })).n, model.size, 'no query: the whole collection');
});

test('a distinct is merged too: its values equal the model\'s with no feeder, arrays unwound', async () => {
  const shop = (await t.client({ retryReads: false })).db('shop');
  const sorted = (vals) => [...vals].sort((a, b) => a - b);
  const values = (field, rows) => sorted(new Set(rows.flatMap((d) => (Array.isArray(d[field]) ? d[field] : [d[field]]))));
  for (const kind of [0, 1, 2]) {
    const rows = [...model.values()].filter((d) => d.kind === kind);
    assert.deepEqual(sorted(await orders.distinct('n', { kind })), values('n', rows), `n of kind ${kind}`);
    assert.deepEqual(sorted(await orders.distinct('tags', { kind })), values('tags', rows), `tags of kind ${kind}`);
  }
  assert.deepEqual(sorted(await orders.distinct('kind')), values('kind', [...model.values()]));
  // A key with a numeric component is left to the tier (here: a 262 with no feeder).
  await expectServerError(shop.command({ distinct: 'orders', key: 'tags.0', query: {} }), 262);
});

test('an aggregate of find\'s stages, or ending in a count, is merged: it equals the model with no feeder', async () => {
  for (let q = 0; q < 12; q++) {
    const spec = { kind: pick(3), nBelow: pick(2) ? undefined : pick(1000), sortDir: pick(2) ? 1 : -1, skip: pick(3) * pick(8), limit: 1 + pick(30) };
    const match = { kind: spec.kind };
    if (spec.nBelow !== undefined) match.n = { $lt: spec.nBelow };
    const got = await orders.aggregate([
      { $match: match }, { $sort: { n: spec.sortDir, _id: spec.sortDir } }, { $skip: spec.skip }, { $limit: spec.limit }, { $project: { n: 1 } },
    ]).toArray();
    assert.deepEqual(got, expected(spec), show({ spec }));
    // Without a $limit: every match (fewer than mergedReadLimit).
    const all = await orders.aggregate([{ $match: match }, { $sort: { n: spec.sortDir, _id: spec.sortDir } }, { $project: { n: 1 } }]).toArray();
    assert.deepEqual(all, expected({ ...spec, skip: 0, limit: model.size }), show({ spec, all: true }));
    const matching = expected({ ...spec, skip: 0, limit: model.size }).length;
    assert.equal(await orders.countDocuments(match), matching, show({ spec, countDocuments: true }));
    assert.equal(await orders.countDocuments(match, { skip: spec.skip, limit: spec.limit }), Math.min(spec.limit, Math.max(0, matching - spec.skip)));
    const counted = await orders.aggregate([{ $match: match }, { $count: 'total' }]).toArray();
    assert.deepEqual(counted, matching ? [{ total: matching }] : [], show({ spec, $count: true }));
  }
  // A count of nothing is an empty cursor, as on mongod.
  assert.deepEqual(await orders.aggregate([{ $match: { kind: 99 } }, { $group: { _id: null, n: { $sum: 1 } } }]).toArray(), []);
  assert.equal(await orders.countDocuments({ kind: 99 }), 0);
  const routing = (await t.status()).coll(NS).routing;
  assert.ok(routing.merged >= 8 * 12 + 12 * 5 + 2, show(routing));
});

test('a find without a limit is merged while its matches fit in mergedReadLimit', async () => {
  for (const kind of [0, 1, 2]) {
    const want = expected({ kind, sortDir: 1, skip: 0, limit: model.size });
    const got = await orders.find({ kind }, { projection: { n: 1 } }).sort({ n: 1, _id: 1 }).toArray();
    assert.deepEqual(got, want, `kind ${kind}`);
    const skipped = await orders.find({ kind }, { projection: { n: 1 } }).sort({ n: 1, _id: 1 }).skip(5).batchSize(7).toArray();
    assert.deepEqual(skipped, want.slice(5), `kind ${kind}, skip 5`);
  }
});

test('a merged find and aggregate answer in the batches the client asks for, the rest served by getMore from the proxy', async () => {
  const client = await t.client({ retryReads: false });
  const db = client.db('shop');
  const want = expected({ kind: 1, sortDir: 1, skip: 0, limit: model.size }).map((d) => d._id);
  assert.ok(want.length > 5, `too few matches to need batches: ${want.length}`);
  const session = client.startSession();
  try {
    for (const first of [
      await db.command({ find: 'orders', filter: { kind: 1 }, sort: { n: 1, _id: 1 }, batchSize: 2 }, { session }),
      await db.command({ aggregate: 'orders', pipeline: [{ $match: { kind: 1 } }, { $sort: { n: 1, _id: 1 } }], cursor: { batchSize: 2 } }, { session }),
    ]) {
      assert.equal(first.cursor.firstBatch.length, 2, show(first.cursor));
      assert.notEqual(Number(first.cursor.id), 0, 'a merged read with more than one batch returned no cursor');
      const got = first.cursor.firstBatch.map((d) => d._id);
      let id = first.cursor.id;
      while (Number(id) !== 0) {
        const more = await db.command({ getMore: Long.fromValue(id), collection: 'orders', batchSize: 3 }, { session });
        assert.ok(more.cursor.nextBatch.length <= 3, show(more.cursor));
        got.push(...more.cursor.nextBatch.map((d) => d._id));
        id = more.cursor.id;
      }
      assert.deepEqual(got, want);
    }
    // A find with batchSize 0 returns an empty first batch and a cursor, as mongod.
    const empty = await db.command({ find: 'orders', filter: { kind: 1 }, batchSize: 0 }, { session });
    assert.equal(empty.cursor.firstBatch.length, 0);
    assert.notEqual(Number(empty.cursor.id), 0);
    await db.command({ killCursors: 'orders', cursors: [Long.fromValue(empty.cursor.id)] }, { session });
  } finally {
    await session.endSession();
  }
});

test('a merged read sees the caller\'s own write at once, and hides a document deleted through the proxy', async () => {
  // Two documents the archive holds (and the random writes left alive).
  const archived = new Set((await t.tierDocs('archive', NS)).map((d) => d._id));
  const [kept, gone] = [...model.keys()].filter((id) => archived.has(id));
  await orders.insertOne({ _id: 'new', date: new Date(), kind: 9, n: 1 });
  await orders.updateOne({ _id: kept }, { $set: { kind: 9, n: 2 } });
  await orders.updateOne({ _id: gone }, { $set: { kind: 9, n: 3 } });
  await orders.deleteOne({ _id: gone });
  const got = await orders.find({ kind: 9 }).sort({ n: 1 }).limit(10).toArray();
  assert.deepEqual(got.map((d) => d._id), ['new', kept]);
  // The archive still holds both with their old kind.
  const archive = await t.tierDocs('archive', NS);
  assert.ok(archive.some((d) => d._id === gone));
  assert.notEqual(archive.find((d) => d._id === kept).kind, 9);
});

test('reads the proxy cannot merge (a collation, a $group by a field, one batch of a find without a limit) still wait for the feeder, and give up with 262', async () => {
  await expectServerError(orders.find({ kind: 1 }, { singleBatch: true, batchSize: 5 }).toArray(), 262);
  await expectServerError(orders.find({ kind: 1 }).limit(5).collation({ locale: 'en', strength: 2 }).toArray(), 262);
  await expectServerError(orders.aggregate([{ $match: { kind: 1 } }, { $group: { _id: '$kind', n: { $sum: 1 } } }]).toArray(), 262);
  await expectServerError(orders.aggregate([{ $sort: { n: 1 } }, { $limit: 3 }]).toArray(), 262);
});

test('a bad filter in a find that would merge gets the tier\'s own error, not a wait', async () => {
  // The proxy's matcher refuses it, so the find is forwarded as before: with the
  // feeder absent that is a 262; what matters is that nothing crashes or merges.
  const err = await orders.find({ n: { $bogus: 1 } }).limit(5).toArray().catch((e) => e);
  assert.ok(err instanceof Error, 'the find fails');
  assert.ok([2, 262].includes(err.code), show({ code: err.code, message: err.message }));
});
