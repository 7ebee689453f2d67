'use strict';
// Round trips per tiered write (issue 12): the proxy sends the queries one step of the
// protocol needs in one round trip (pipelined on one connection, Tier::runAll), and a
// promotion transaction's statements in one more before its commit. Counted with the
// proxy's own per-tier counters (haloclineStatus tiers.<tier>.roundTrips), workers off
// so that nothing but the client's operation talks to the tiers; each test also checks
// that the write did what it must (CONSISTENCY.md, Writes, Promotion).

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startTiered, waitUntil } = require('../lib/tiered');

const NS = 'shop.orders';
let t;
let orders;  // through the proxy
let fastDb;  // the fast tier, directly
let archive; // the archive's collection, directly

before(async () => {
  t = await startTiered({ collections: [NS], horizon: '10m', workers: false });
  await t.waitHealthy({ roles: ['disabled'] });
  orders = (await t.client({ retryWrites: true })).db('shop').collection('orders');
  fastDb = (await t.directClient('fast')).db('shop');
  archive = (await t.directClient('archive')).db('shop').collection('orders');
});

after(async () => {
  if (t) await t.cleanup();
});

async function trips() {
  const raw = (await t.status()).raw;
  return { fast: Number(raw.tiers.fast.roundTrips), archive: Number(raw.tiers.archive.roundTrips) };
}

/** Round trips `fn` made to each tier (nothing else talks to them: workers are off). */
async function counted(fn) {
  const a = await trips();
  await fn();
  const b = await trips();
  return { fast: b.fast - a.fast, archive: b.archive - a.archive };
}

/** Waits until no pin is held on `id` (the write's unpin runs after its reply). */
async function unpinned(id) {
  const pins = (await t.directClient('fast')).db('halocline').collection('pins');
  await waitUntil(`the pin on ${id} released`, async () => {
    const p = await pins.findOne({ '_id.ns': NS, '_id.id': id });
    return !p || Number(p.n) === 0;
  });
}

test('an insert of a new _id: one fast round trip for its presence and tombstone keys, one for the insert, one archive lookup', async () => {
  const n = await counted(() => orders.insertOne({ _id: 'new-1', date: new Date(), n: 1 }));
  assert.deepEqual(n, { fast: 2, archive: 1 });
  assert.equal((await fastDb.collection('orders').findOne({ _id: 'new-1' })).n, 1);
  // An _id the archive holds is still refused (the lookup went there).
  await archive.insertOne({ _id: 'old-1', date: new Date(Date.now() - 3_600_000), n: 0 });
  await assert.rejects(orders.insertOne({ _id: 'old-1', date: new Date(), n: 2 }), (e) => e.code === 11000);
  await unpinned('old-1');
});

test('a retryable update of a document in the fast tier: its presence and retry record in one round trip, then the update', async () => {
  await orders.insertOne({ _id: 'hot-1', date: new Date(), n: 1 });
  const n = await counted(async () => {
    const r = await orders.updateOne({ _id: 'hot-1' }, { $inc: { n: 1 } });
    assert.equal(r.modifiedCount, 1);
  });
  assert.deepEqual(n, { fast: 2, archive: 0 });
  assert.equal((await fastDb.collection('orders').findOne({ _id: 'hot-1' })).n, 2);
});

test('an update that copies a document up: the promotion transaction costs two fast round trips (statements, commit)', async () => {
  const old = new Date(Date.now() - 3_600_000);
  await archive.insertOne({ _id: 'arch-1', date: old, n: 5 });
  const now = new Date();
  // It moves the age field, so it cannot run in the archive (a cold write): it promotes.
  const n = await counted(async () => {
    const r = await orders.updateOne({ _id: 'arch-1' }, { $set: { date: now }, $inc: { n: 1 } });
    assert.equal(r.modifiedCount, 1);
    await unpinned('arch-1');
  });
  // presence, tombstone keys, pin; presence + keys + epoch; statements; commit; update; unpin.
  assert.deepEqual(n, { fast: 8, archive: 2 });
  const doc = await fastDb.collection('orders').findOne({ _id: 'arch-1' });
  assert.equal(doc.n, 6);
  assert.equal(doc.date.getTime(), now.getTime());
  // The promotion's guard went with its transaction: no tombstone key is left.
  const keys = (await t.directClient('fast')).db('halocline').collection('tombstones');
  assert.equal(await keys.countDocuments({ '_id.ns': NS, '_id.id': 'arch-1' }), 0);
});
