'use strict';
// Routing through the proxy: which tier each command goes to (haloclineExplain, which must
// not run the command), that haloclineStatus's routing counters move with the reads, that
// archive reads see the caller's own writes (feeder wait) or fail with 262, that a
// transaction crossing from an untiered to a tiered collection (263) and change streams
// (115) on tiered collections are refused, and that
// an untiered collection is passed through to the archive with CRUD, transactions and
// change streams working.

const { test, before, after, describe } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { MongoClient } = require('mongodb');
const { startTiered, ProxyServer, show, waitUntil } = require('../lib/tiered');
const { expectServerError } = require('../lib/fixture');

const NS = 'shop.orders';
const MIN = 60_000;

let t;
let client;
let orders;
let customers;
const OLD = new Date(Date.now() - 400 * 86_400_000);

before(async () => {
  // A long horizon: nothing ages out while the file runs, so routing depends only on the
  // filters (and the finished warm pass).
  t = await startTiered({ collections: [NS], horizon: '10m', guard: '1s', startProxy: false });
  const archive = await t.tierClient('archive');
  const docs = [];
  for (let i = 0; i < 40; i++) {
    // Half old, half within the last 5 minutes (warmed into the fast tier).
    const date = i % 2 ? new Date(Date.now() - 30_000 - i * 5_000) : new Date(OLD.getTime() + i * 1000);
    docs.push({ _id: i, date, cat: i % 4, v: i });
  }
  await archive.db('shop').collection('orders').createIndex({ date: 1 });
  await archive.db('shop').collection('orders').insertMany(docs);
  await archive.db('shop').collection('customers').insertMany([{ _id: 1, name: 'a' }, { _id: 2, name: 'b' }]);
  await t.startProxy();
  await t.waitHealthy();
  await t.waitWarmDone(NS);
  client = await t.client();
  orders = client.db('shop').collection('orders');
  customers = client.db('shop').collection('customers');
});
after(async () => {
  if (t) await t.cleanup();
});

const recent = () => new Date(Date.now() - 1000);

describe('haloclineExplain', () => {
  const cases = [
    ['find by exact _id', () => ({ find: 'orders', filter: { _id: 5 } }), 'fast-then-archive'],
    ['find by exact _id with another condition', () => ({ find: 'orders', filter: { _id: 5, cat: 1 } }), 'fast-then-archive'],
    ['find date >= recent', () => ({ find: 'orders', filter: { date: { $gte: recent() } } }), 'fast'],
    ['find date > recent and another field', () => ({ find: 'orders', filter: { date: { $gt: recent() }, cat: 1 } }), 'fast'],
    ['find closed recent range', () => ({ find: 'orders', filter: { date: { $gte: recent(), $lt: new Date(Date.now() + MIN) } } }), 'fast'],
    ['find date == recent', () => ({ find: 'orders', filter: { date: recent() } }), 'fast'],
    ['find date $eq recent', () => ({ find: 'orders', filter: { date: { $eq: recent() } } }), 'fast'],
    ['find date $in recent dates', () => ({ find: 'orders', filter: { date: { $in: [recent(), new Date()] } } }), 'fast'],
    ['find date $in with an old date', () => ({ find: 'orders', filter: { date: { $in: [recent(), OLD] } } }), 'archive'],
    ['find without filter', () => ({ find: 'orders', filter: {} }), 'archive'],
    ['find on another field', () => ({ find: 'orders', filter: { cat: 1 } }), 'archive'],
    ['find date >= old', () => ({ find: 'orders', filter: { date: { $gte: OLD } } }), 'archive'],
    ['find date >= just outside the horizon', () => ({ find: 'orders', filter: { date: { $gte: new Date(Date.now() - 11 * MIN) } } }), 'archive'],
    ['find date < recent (upper bound only)', () => ({ find: 'orders', filter: { date: { $lt: recent() } } }), 'archive'],
    ['find date bound under $or', () => ({ find: 'orders', filter: { $or: [{ date: { $gte: recent() } }, { cat: 1 }] } }), 'archive'],
    ['find date bound under $not', () => ({ find: 'orders', filter: { date: { $not: { $lt: recent() } } } }), 'archive'],
    ['count date >= recent', () => ({ count: 'orders', query: { date: { $gte: recent() } } }), 'fast'],
    ['count without filter', () => ({ count: 'orders', query: {} }), 'archive'],
    ['distinct date >= recent', () => ({ distinct: 'orders', key: 'cat', query: { date: { $gte: recent() } } }), 'fast'],
    ['distinct without filter', () => ({ distinct: 'orders', key: 'cat' }), 'archive'],
    [
      'aggregate leading $match date >= recent',
      () => ({ aggregate: 'orders', pipeline: [{ $match: { date: { $gte: recent() } } }, { $group: { _id: '$cat', n: { $sum: 1 } } }], cursor: {} }),
      'fast',
    ],
    [
      'aggregate with $lookup of another collection',
      () => ({
        aggregate: 'orders',
        pipeline: [{ $match: { date: { $gte: recent() } } }, { $lookup: { from: 'customers', localField: 'cat', foreignField: '_id', as: 'c' } }],
        cursor: {},
      }),
      'archive',
    ],
    [
      'aggregate with $unionWith another collection',
      () => ({ aggregate: 'orders', pipeline: [{ $match: { date: { $gte: recent() } } }, { $unionWith: 'customers' }], cursor: {} }),
      'archive',
    ],
    [
      'aggregate without a leading $match',
      () => ({ aggregate: 'orders', pipeline: [{ $sort: { v: 1 } }, { $match: { date: { $gte: recent() } } }], cursor: {} }),
      'archive',
    ],
    ['find on an untiered collection by _id', () => ({ find: 'customers', filter: { _id: 1 } }), 'archive'],
    ['find on an untiered collection by a recent date', () => ({ find: 'customers', filter: { date: { $gte: recent() } } }), 'archive'],
    ['insert', () => ({ insert: 'orders', documents: [{ _id: 'explained', date: new Date() }] }), 'fast'],
    ['update by _id', () => ({ update: 'orders', updates: [{ q: { _id: 5 }, u: { $set: { explained: true } } }] }), 'fast'],
    ['update by filter', () => ({ update: 'orders', updates: [{ q: { cat: 1 }, u: { $set: { explained: true } }, multi: true }] }), 'fast'],
    ['delete', () => ({ delete: 'orders', deletes: [{ q: { _id: 6 }, limit: 1 }] }), 'fast'],
    ['findAndModify', () => ({ findAndModify: 'orders', query: { _id: 7 }, update: { $inc: { v: 100 } } }), 'fast'],
    ['insert into an untiered collection', () => ({ insert: 'customers', documents: [{ _id: 'explained' }] }), 'archive'],
  ];
  for (const [name, cmd, want] of cases) {
    test(`${name} -> ${want}`, async () => {
      const c = cmd();
      const r = await t.explain(c, 'shop');
      assert.equal(r.tier, want, `haloclineExplain(${show(c)}) = ${show(r.raw)}`);
    });
  }

  test('explaining a write does not run it', async () => {
    await t.explain({ insert: 'orders', documents: [{ _id: 'explained-only', date: new Date() }] });
    await t.explain({ update: 'orders', updates: [{ q: { _id: 9 }, u: { $set: { explained: true } } }] });
    await t.explain({ delete: 'orders', deletes: [{ q: { _id: 11 }, limit: 1 }] });
    await t.explain({ insert: 'customers', documents: [{ _id: 'explained-only' }] });
    assert.equal(await orders.findOne({ _id: 'explained-only' }), null);
    const nine = await orders.findOne({ _id: 9 });
    assert.ok(nine && !('explained' in nine), `update ran: ${show(nine)}`);
    assert.ok(await orders.findOne({ _id: 11 }), 'delete ran');
    assert.equal(await customers.findOne({ _id: 'explained-only' }), null);
    const fast = await t.tierDocs('fast', NS, { _id: 'explained-only' });
    assert.deepEqual(fast, []);
  });

  test('a bad explain request is an error, not a guess', async () => {
    const admin = client.db('admin');
    await assert.rejects(admin.command({ haloclineExplain: 'find', db: 'shop' }), (e) => typeof e.code === 'number' && e.code !== 0);
  });
});

describe('routing counters and answers', () => {
  test('fast-routed reads count as fast, archive-routed as archive, and both answer fully', async () => {
    const truth = await (await t.tierClient('archive')).db('shop').collection('orders').find().toArray();
    await t.waitFeederCaughtUp();
    const since = new Date(Date.now() - 3 * MIN);
    const want = truth
      .filter((d) => d.date >= since)
      .map((d) => d._id)
      .sort((a, b) => a - b);
    assert.ok(want.length > 5, 'the preload has recent documents');
    assert.equal((await t.explain({ find: 'orders', filter: { date: { $gte: since } } })).tier, 'fast');
    const before = await t.status();
    for (let i = 0; i < 5; i++) {
      const got = (await orders.find({ date: { $gte: since } }).toArray()).map((d) => d._id).sort((a, b) => a - b);
      assert.deepEqual(got, want, 'a fast-routed read returns every matching document');
    }
    const mid = await t.status();
    assert.equal(mid.coll(NS).routing.fast - before.coll(NS).routing.fast, 5, `fast counter: ${show(before.coll(NS).routing)} -> ${show(mid.coll(NS).routing)}`);
    assert.equal(mid.coll(NS).routing.archive - before.coll(NS).routing.archive, 0, `archive counter moved: ${show(mid.coll(NS).routing)}`);
    assert.ok(mid.routing.fast - before.routing.fast >= 5, `global fast counter: ${show(before.routing)} -> ${show(mid.routing)}`);

    for (let i = 0; i < 3; i++) {
      const got = await orders.countDocuments({ cat: 1 });
      assert.equal(got, truth.filter((d) => d.cat === 1).length);
    }
    const end = await t.status();
    assert.equal(end.coll(NS).routing.archive - mid.coll(NS).routing.archive, 3, `archive counter: ${show(mid.coll(NS).routing)} -> ${show(end.coll(NS).routing)}`);
    assert.equal(end.coll(NS).routing.fast - mid.coll(NS).routing.fast, 0, `fast counter moved: ${show(end.coll(NS).routing)}`);
    assert.ok(end.routing.archive - mid.routing.archive >= 3);
    for (const s of [end.hitRatio, end.coll(NS).hitRatio]) {
      assert.ok(s !== null && s >= 0 && s <= 1, `hitRatio in [0, 1]: ${show(end.raw)}`);
    }
  });

  test('exact _id lookups answer from the fast tier or, when absent there, from the archive', async () => {
    const before = await t.status();
    const oldDoc = await orders.findOne({ _id: 0 }); // old: only in the archive
    assert.equal(oldDoc && oldDoc.v, 0);
    const recentDoc = await orders.findOne({ _id: 1 }); // recent: warmed
    assert.equal(recentDoc && recentDoc.v, 1);
    assert.equal(await orders.findOne({ _id: 'nope' }), null);
    const after = await t.status();
    const moved = (s) => s.coll(NS).routing.fast + s.coll(NS).routing.archive;
    assert.ok(moved(after) - moved(before) >= 3, `routing counters did not move: ${show(before.coll(NS).routing)} -> ${show(after.coll(NS).routing)}`);
  });

  test('archive-routed reads see the caller\'s own writes at once (feeder wait)', async () => {
    for (let i = 0; i < 15; i++) {
      await orders.insertOne({ _id: `ryw-${i}`, date: OLD, cat: 77, v: i });
      assert.equal(await orders.countDocuments({ cat: 77 }), i + 1, `insert #${i} not visible to an archive-routed count`);
      await orders.updateOne({ _id: `ryw-${i}` }, { $set: { v: -(i + 1) } });
      const got = await orders.find({ cat: 77, v: -(i + 1) }).toArray();
      assert.deepEqual(got.map((d) => d._id), [`ryw-${i}`], `update #${i} not visible to an archive-routed find`);
    }
    await orders.deleteMany({ cat: 77, v: { $lte: -11 } });
    assert.equal(await orders.countDocuments({ cat: 77 }), 10, 'deletes visible to an archive-routed count');
    const vs = (await orders.distinct('v', { cat: 77 })).sort((a, b) => a - b);
    assert.deepEqual(vs, [-10, -9, -8, -7, -6, -5, -4, -3, -2, -1]);
  });
});

describe('refused on tiered collections', () => {
  test('a transaction that wrote an untiered collection first is refused on the tiered one and leaves nothing', async () => {
    const session = client.startSession();
    try {
      session.startTransaction();
      await customers.insertOne({ _id: 'txn-mixed' }, { session });
      await expectServerError(orders.updateOne({ _id: 1 }, { $set: { txn: true } }, { session }), 263);
      await session.abortTransaction().catch(() => {});
    } finally {
      await session.endSession();
    }
    assert.equal(await customers.findOne({ _id: 'txn-mixed' }), null, 'the aborted transaction left its untiered write');
    const one = await orders.findOne({ _id: 1 });
    assert.ok(!('txn' in one), `the tiered write applied: ${show(one)}`);
  });

  test('a change stream on a tiered collection, its database or the cluster fails with 115', async () => {
    for (const [what, stream] of [
      ['collection', () => orders.watch()],
      ['database', () => client.db('shop').watch()],
      ['cluster', () => client.watch()],
    ]) {
      const s = stream();
      try {
        const err = await expectServerError(s.tryNext(), 115);
        assert.ok(err.message.length > 0, `${what}: empty message`);
      } finally {
        await s.close().catch(() => {});
      }
    }
  });

  test('a view on a tiered collection fails with 115; a view on an untiered one works', async () => {
    const shop = client.db('shop');
    const err = await expectServerError(shop.createCollection('recent', { viewOn: 'orders', pipeline: [] }), 115);
    assert.match(err.message, /shop\.orders/);
    await shop.createCollection('scratch');
    await shop.createCollection('scratchLater', { viewOn: 'scratch', pipeline: [{ $match: { x: 1 } }] });
    await expectServerError(shop.command({ collMod: 'scratchLater', viewOn: 'orders', pipeline: [] }), 115);
    await shop.collection('scratch').insertMany([{ _id: 1, x: 1 }, { _id: 2, x: 2 }]);
    assert.deepEqual(await shop.collection('scratchLater').find().toArray(), [{ _id: 1, x: 1 }]);
    await shop.collection('scratchLater').drop();
    await shop.collection('scratch').drop();
  });
});

describe('untiered collections pass through to the archive', () => {
  test('CRUD lands in the archive only', async () => {
    const c = client.db('shop').collection('notes');
    await c.insertMany([{ _id: 1, x: 1 }, { _id: 2, x: 2 }, { _id: 3, x: 3 }]);
    assert.equal((await c.updateOne({ _id: 2 }, { $inc: { x: 10 } })).modifiedCount, 1);
    assert.equal((await c.deleteOne({ _id: 3 })).deletedCount, 1);
    const r = await c.findOneAndUpdate({ _id: 1 }, { $set: { y: true } }, { returnDocument: 'after' });
    assert.deepEqual(r, { _id: 1, x: 1, y: true });
    assert.deepEqual(await c.find().sort({ _id: 1 }).toArray(), [{ _id: 1, x: 1, y: true }, { _id: 2, x: 12 }]);
    assert.deepEqual(await t.tierDocs('archive', 'shop.notes'), [{ _id: 1, x: 1, y: true }, { _id: 2, x: 12 }]);
    assert.deepEqual(await t.tierDocs('fast', 'shop.notes'), []);
    await expectServerError(c.insertOne({ _id: 1 }), 11000);
  });

  test('transactions commit and abort on an untiered collection', async () => {
    const c = client.db('shop').collection('ledger');
    await c.insertOne({ _id: 'seed' });
    const session = client.startSession();
    try {
      session.startTransaction();
      await c.insertOne({ _id: 'a' }, { session });
      await c.insertOne({ _id: 'b' }, { session });
      await session.commitTransaction();
      session.startTransaction();
      await c.insertOne({ _id: 'c' }, { session });
      await c.deleteOne({ _id: 'seed' }, { session });
      await session.abortTransaction();
    } finally {
      await session.endSession();
    }
    assert.deepEqual((await c.find().sort({ _id: 1 }).toArray()).map((d) => d._id), ['a', 'b', 'seed']);
    assert.deepEqual((await t.tierDocs('archive', 'shop.ledger')).map((d) => d._id), ['a', 'b', 'seed']);
  });

  test('a change stream on an untiered collection delivers its events', async () => {
    const c = client.db('shop').collection('feed');
    await c.insertOne({ _id: 0 });
    const stream = c.watch([], { fullDocument: 'updateLookup' });
    try {
      assert.equal(await stream.tryNext(), null);
      await c.insertOne({ _id: 1, a: 1 });
      await c.updateOne({ _id: 1 }, { $set: { a: 2 } });
      await c.deleteOne({ _id: 1 });
      const evs = [await stream.next(), await stream.next(), await stream.next()];
      assert.deepEqual(evs.map((e) => e.operationType), ['insert', 'update', 'delete']);
      assert.deepEqual(evs[0].fullDocument, { _id: 1, a: 1 });
      assert.deepEqual(evs[1].updateDescription.updatedFields, { a: 2 });
      assert.deepEqual(evs[2].documentKey, { _id: 1 });
      // Resume after the first event replays the rest.
      const resumed = c.watch([], { resumeAfter: evs[0]._id });
      try {
        const r = [await resumed.next(), await resumed.next()];
        assert.deepEqual(r.map((e) => e.operationType), ['update', 'delete']);
      } finally {
        await resumed.close();
      }
    } finally {
      await stream.close();
    }
  });

  test('a change stream on a database without tiered collections works', async () => {
    const db = client.db('plain');
    const stream = db.watch();
    try {
      assert.equal(await stream.tryNext(), null);
      await db.collection('x').insertOne({ _id: 'p' });
      const ev = await stream.next();
      assert.equal(ev.operationType, 'insert');
      assert.deepEqual(ev.ns, { db: 'plain', coll: 'x' });
    } finally {
      await stream.close();
    }
  });
});

test('set-up: the records of retried deletes expire with a TTL index, after 30 minutes', async () => {
  const fast = await t.directClient('fast');
  const idx = (await fast.db('halocline').collection('retries').indexes()).find((i) => i.name === 'halocline_retries_ttl');
  assert.ok(idx, 'halocline.retries has its TTL index');
  assert.deepEqual(idx.key, { at: 1 });
  assert.equal(idx.expireAfterSeconds, 1800);
});

test('hello through the proxy answers like mongos', async () => {
  const hello = await client.db('admin').command({ hello: 1 });
  assert.equal(hello.msg, 'isdbgrid', show(hello));
  assert.equal(hello.isWritablePrimary, true);
  assert.equal(hello.setName, undefined, 'a mongos-like hello names no replica set');
});

test('without workers, an archive read after a write times out with 262 instead of answering stale, through any proxy and after a restart', { timeout: 120_000 }, async () => {
  const t2 = await startTiered({ collections: [NS], horizon: '10m', workers: false, causalWaitTimeout: '1s' });
  try {
    const s = await t2.status();
    assert.equal(s.role, 'disabled', show(s.raw));
    const c = await t2.client({ retryReads: false });
    const o = c.db('shop').collection('orders');
    // No feeder has ever run, so nothing says the archive has caught up with the fast
    // tier (which holds at least the proxy's own set-up writes): even before any
    // application write, an archive read that cannot be merged waits and gives up.
    await expectServerError(o.find({ cat: 1 }).collation({ locale: 'en', strength: 2 }).toArray(), 262);
    await o.insertOne({ _id: 1, date: new Date(), cat: 1 });
    // The fast tier answers exact lookups; anything routed to the archive must wait for a
    // feeder that is not running, and gives up with ExceededTimeLimit.
    assert.deepEqual(await o.findOne({ _id: 1 }), { _id: 1, date: (await t2.tierDocs('fast', NS))[0].date, cat: 1 });
    assert.equal((await t2.explain({ find: 'orders', filter: { date: { $gte: new Date(Date.now() - 1000) } } })).tier, 'archive',
      'no finished warm pass: a recent range cannot be proven complete in the fast tier');
    const err = await expectServerError(o.aggregate([{ $match: { cat: 1 } }, { $group: { _id: '$cat', n: { $sum: 1 } } }]).toArray(), 262);
    assert.ok(err.message.length > 0);
    // A merged count reads both tiers and needs no feeder.
    assert.equal(await o.countDocuments({ cat: 1 }), 1);
    await expectServerError(o.find({ date: { $gte: new Date(0) } }).collation({ locale: 'en' }).toArray(), 262);
    // A merged find (with or without a limit) sees the write at once.
    assert.deepEqual((await o.find({ date: { $gte: new Date(0) } }).toArray()).map((d) => d._id), [1]);
    // Reads of untiered collections have nothing to wait for.
    await c.db('shop').collection('other').insertOne({ _id: 1 });
    assert.equal(await c.db('shop').collection('other').countDocuments({}), 1);

    // The acknowledged write is still not in the archive. A second proxy in front of the same
    // tiers (as a driver given both in one connection string would use), and this proxy
    // after a kill -9 and restart, must not answer from the archive as if it were.
    const second = new ProxyServer({
      bin: t2.bin,
      configPath: path.join(t2.dir, 'proxy-b.yaml'),
      configFor: (port) => t2.configFor(port),
      name: 'halocline proxy B',
    });
    await second.start(0);
    const problems = [];
    try {
      const cb = await t2.track(new MongoClient(second.uri(), { serverSelectionTimeoutMS: 10_000, retryReads: false }));
      problems.push(await staleProblem(cb.db('shop').collection('orders'), 'through a second proxy'));
    } finally {
      await second.stop();
    }
    await t2.killProxy();
    await t2.restartProxy();
    problems.push(await staleProblem(o, 'through the same proxy after kill -9 and restart'));
    assert.deepEqual(problems.filter(Boolean), []);
  } finally {
    await t2.cleanup();
  }
});

test('without workers, an exact _id lookup of a document deleted through the proxy answers nothing while the archive still holds it', { timeout: 120_000 }, async () => {
  // Cold writes off: the delete must leave a tombstone (a cold one would delete in the archive).
  const t2 = await startTiered({ collections: [NS], horizon: '10m', workers: false, extra: { tiering: { coldWrites: false } } });
  try {
    const archive = await t2.tierClient('archive');
    await archive.db('shop').collection('orders').insertMany([
      { _id: 'gone', date: OLD, cat: 1 },
      { _id: 'kept', date: OLD, cat: 1 },
    ]);
    const c = await t2.client({ retryReads: false });
    const o = c.db('shop').collection('orders');
    // Absent from the fast tier and not deleted: the archive answers.
    assert.deepEqual(await o.findOne({ _id: 'kept' }), { _id: 'kept', date: OLD, cat: 1 });
    assert.deepEqual(await o.findOne({ _id: 'kept', cat: 1 }), { _id: 'kept', date: OLD, cat: 1 });
    assert.equal(await o.findOne({ _id: 'kept', cat: 2 }), null);
    assert.equal((await o.deleteOne({ _id: 'gone' })).deletedCount, 1);
    // No feeder: the archive still has it; only the fast tier's tombstone says it is gone.
    assert.deepEqual((await t2.tierDocs('archive', NS)).map((d) => d._id).sort(), ['gone', 'kept']);
    assert.equal(await o.findOne({ _id: 'gone' }), null, 'a plain _id lookup answered a deleted document');
    assert.equal(await o.findOne({ _id: { $eq: 'gone' } }), null, '$eq _id lookup answered a deleted document');
    assert.equal(await o.findOne({ _id: 'gone', cat: 1 }), null, 'an _id lookup with another condition answered a deleted document');
  } finally {
    await t2.cleanup();
  }
});

/**
 * Two counts of {cat: 1} on a tiered collection whose only document (cat 1, written through
 * a proxy, acknowledged) never reached the archive. countDocuments is merged: it must
 * answer 1. A $group by cat cannot be merged and must wait for a feeder that does not run,
 * so the only acceptable outcome is ExceededTimeLimit (262). 0 (or no group) is a stale answer.
 * Returns a description of what went wrong, or null.
 */
async function staleProblem(coll, how) {
  const merged = await coll.countDocuments({ cat: 1 }).catch((e) => `error ${e.code} ${e.message}`);
  if (merged !== 1) return `${how}: a merged count answered ${merged}, ignoring an acknowledged write (read-your-writes)`;
  let got;
  try {
    got = await coll.aggregate([{ $match: { cat: 1 } }, { $group: { _id: '$cat', n: { $sum: 1 } } }]).toArray();
  } catch (e) {
    return e.code === 262 ? null : `${how}: expected ExceededTimeLimit (262), got ${e.code} ${e.message}`;
  }
  return `${how}: an archive-routed $group answered ${JSON.stringify(got)} without a feeder`;
}

test('a proof-routed cursor on the fast tier ends after half the clock-skew guard: a later getMore gets CursorNotFound (43)', async () => {
  const filter = { date: { $gte: new Date(Date.now() - 4 * MIN) } };
  assert.equal((await t.explain({ find: 'orders', filter })).tier, 'fast');
  const first = await client.db('shop').command({ find: 'orders', filter, batchSize: 2 });
  assert.equal(first.cursor.firstBatch.length, 2, show(first));
  assert.notEqual(Number(first.cursor.id), 0, show(first));
  // The wait is the condition under test: the getMore comes after the bound.
  await new Promise((resolve) => setTimeout(resolve, t.guardMs));
  const getMore = { getMore: first.cursor.id, collection: 'orders', batchSize: 2 };
  const e = await expectServerError(client.db('shop').command(getMore), 43);
  assert.match(e.message, /clock-skew guard/, show(e));
});

test('concurrent _id reads answered by the archive copy each document up once, whole (batched in the background)', { timeout: 120_000 }, async () => {
  // The warmer crawls (one document a second, newest first, through 30 newer decoys),
  // so the documents read below reach the fast tier only by the reads' promotions.
  const t2 = await startTiered({
    collections: [NS], horizon: '30d',
    extra: { workers: { warmer: { batchSize: 1, maxDocsPerSecond: 1 } } },
    startProxy: false,
  });
  try {
    const archive = await t2.tierClient('archive');
    const now = Date.now();
    const decoys = Array.from({ length: 30 }, (_, i) => ({ _id: `decoy-${i}`, date: new Date(now - 60_000 - i * 1000), cat: 0 }));
    const docs = Array.from({ length: 200 }, (_, i) => ({ _id: `read-${i}`, date: new Date(now - 86_400_000 - i * 1000), cat: i % 3, v: i }));
    await archive.db('shop').collection('orders').insertMany([...decoys, ...docs]);
    await t2.startProxy();
    await t2.waitHealthy();
    const c = await t2.client({ maxPoolSize: 32 });
    const o = c.db('shop').collection('orders');
    const before = (await t2.status()).coll(NS).routing.promoted;
    // Each document read twice at once, and a third of them also with another condition.
    const reads = [];
    for (const d of docs) {
      reads.push(o.findOne({ _id: d._id }), o.findOne({ _id: d._id }));
      if (d.v % 3 === 0) reads.push(o.findOne({ _id: d._id, cat: d.cat }));
    }
    const got = await Promise.all(reads);
    assert.ok(got.every((d) => d && d._id.startsWith('read-')), 'a read missed its document');
    const ids = docs.map((d) => d._id);
    await waitUntil('every document read is in the fast tier', async () => (await t2.tierDocs('fast', NS, { _id: { $in: ids } })).length === ids.length);
    const fast = (await t2.tierDocs('fast', NS, { _id: { $in: ids } })).sort((a, b) => a.v - b.v);
    assert.deepEqual(fast, docs);
    const promoted = (await t2.status()).coll(NS).routing.promoted - before;
    assert.equal(promoted, ids.length, 'each document copied up exactly once');
    // Copies of what the archive holds: no tombstone, guard or mark is left behind.
    assert.deepEqual(await t2.tombstones(NS), []);
  } finally {
    await t2.cleanup();
  }
});
