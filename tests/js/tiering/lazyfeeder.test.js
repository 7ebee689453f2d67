'use strict';
// The lazy feeder (workers.feeder.mode: lazy; docs/CONSISTENCY.md, The feeder, Lazy mode):
// it gathers the documents the application writes and writes each to the archive once,
// when lazyDelay has passed or when a read that cannot be merged needs the archive
// current. Meanwhile every read through the proxy sees every write (merged finds,
// counts and distincts, `_id` lookups without asking the feeder; collated finds and
// aggregations after asking it); the evictor leaves a gathered document in the fast tier until the archive has
// it (its copy differs); and a leader killed with everything gathered loses nothing: its successor
// replays the change stream from the last token it saved.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startTiered, waitUntil, tsValue, show } = require('../lib/tiered');

const NS = 'shop.orders';
const OLD = new Date(Date.now() - 400 * 86_400_000);
let t;
let shop;
let orders;
let archive;
let fast;

before(async () => {
  t = await startTiered({
    collections: [NS],
    horizon: '10m',
    startProxy: false,
    workers: { feeder: { mode: 'lazy', lazyDelay: '10m' } },
  });
  const docs = [];
  for (let i = 0; i < 30; i++) docs.push({ _id: i, date: new Date(OLD.getTime() + i * 1000), kind: i % 3, n: i });
  await (await t.tierClient('archive')).db('shop').collection('orders').insertMany(docs);
  await t.startProxy();
  await t.waitHealthy();
  await t.waitWarmDone(NS);
  shop = (await t.client()).db('shop');
  orders = shop.collection('orders');
  archive = (await t.directClient('archive')).db('shop').collection('orders');
  fast = (await t.directClient('fast')).db('shop').collection('orders');
});
after(async () => {
  if (t) await t.cleanup();
});

/** Waits until the leader's feeder has received every event up to a fresh write barrier. */
async function waitReceived() {
  const barrier = await t.writeBarrier();
  return waitUntil(`the feeder to receive every event up to ${show(barrier)}`, async () => {
    const s = await t.status();
    return s.feeder.receivedTime !== null && tsValue(s.feeder.receivedTime) >= tsValue(barrier) ? s : false;
  });
}

test('the lazy feeder gathers writes, reads see them all, merged reads ask nothing, and one demand writes each document once', async () => {
  await t.waitFeederCaughtUp();
  const now = Date.now();
  await orders.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: `new${i}`, date: new Date(now), kind: 1, n: 0 })));
  for (let round = 0; round < 5; round++) await orders.updateMany({ _id: /^new/ }, { $inc: { n: 1 } });
  assert.equal((await orders.deleteOne({ _id: 'new19' })).deletedCount, 1);

  const gathered = await waitReceived();
  assert.equal(gathered.feeder.mode, 'lazy', show(gathered.raw));
  // 20 documents and the barrier's own (inserted and deleted), none written yet.
  assert.equal(gathered.feeder.pending, 21, show(gathered.raw));
  assert.equal(await archive.countDocuments({ _id: /^new/ }), 0);
  const before = gathered.feeder.archiveWrites;

  // Reads that need nothing from the feeder: an _id lookup, a merged find, a merged count.
  assert.equal((await orders.findOne({ _id: 'new3' })).n, 5);
  const merged = await orders.find({ kind: 1, n: { $lt: 10 } }).sort({ n: -1, _id: 1 }).limit(3).toArray();
  assert.deepEqual(merged.map((d) => [d._id, d.n]), [[7, 7], ['new0', 5], ['new1', 5]]);
  const counted = await shop.command({ count: 'orders', query: { kind: 1 } });
  assert.equal(counted.n, 10 + 19);
  assert.equal((await t.status()).feeder.pending, 21, 'a merged read asked the feeder for nothing');

  const kinds = await orders.distinct('n', { kind: 1 });
  assert.deepEqual(kinds.sort((a, b) => a - b), [1, 4, 5, 7, 10, 13, 16, 19, 22, 25, 28]);
  assert.equal((await t.status()).feeder.pending, 21, 'a merged distinct asked the feeder for nothing');

  // A collated find cannot be merged (the proxy compares binary): it asks the feeder
  // to write what it gathered first, then reads the archive.
  const collated = await orders.find({ kind: 1 }, { collation: { locale: 'en', strength: 2 } }).toArray();
  assert.equal(collated.length, 29);
  assert.ok(collated.filter((d) => String(d._id).startsWith('new')).every((d) => d.n === 5), show(collated));
  const flushed = await t.status();
  assert.equal(flushed.feeder.pending, 0, show(flushed.raw));
  // Each document once: 19 replacements and 2 deletes, where an eager feeder would
  // have written 20 inserts, 100 updates and 2 deletes.
  assert.equal(flushed.feeder.archiveWrites - before, 21, show(flushed.raw));
  const inArchive = await archive.find({ _id: /^new/ }).toArray();
  assert.equal(inArchive.length, 19);
  assert.ok(inArchive.every((d) => d.n === 5), show(inArchive));
});

test('an aged document stays in the fast tier until the lazy feeder wrote it, then is evicted', async () => {
  await t.waitFeederCaughtUp();
  await orders.insertOne({ _id: 'aged', date: new Date(OLD.getTime() - 5000), kind: 2, n: 1 });
  await waitReceived();
  // An evictor pass after the insert counted it in its backlog and did not remove it.
  const s = await waitUntil('an evictor pass to count the aged document', async () => {
    const v = await t.status();
    return v.coll(NS).backlog >= 1 ? v : false;
  });
  assert.equal(s.feeder.pending >= 1, true, show(s.raw));
  assert.equal((await fast.findOne({ _id: 'aged' })).n, 1);
  assert.equal(await archive.findOne({ _id: 'aged' }), null);
  // Written on demand, then evicted.
  await (await t.client()).db('admin').command({ haloclineFlushFeeder: 1 });
  assert.equal((await archive.findOne({ _id: 'aged' })).n, 1);
  await waitUntil('the evictor to remove the written document', async () => (await fast.findOne({ _id: 'aged' })) === null);
  assert.equal((await orders.findOne({ _id: 'aged' })).n, 1);
});

test('a leader killed with writes gathered loses none of them', async () => {
  await t.waitFeederCaughtUp();
  await orders.insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: `k${i}`, date: new Date(), kind: 0, n: i })));
  await orders.updateOne({ _id: 'k0' }, { $set: { n: 100 } });
  const s = await waitReceived();
  assert.ok(s.feeder.pending >= 10, show(s.raw));
  assert.equal(await archive.countDocuments({ _id: /^k/ }), 0);

  await t.killProxy();
  await t.restartProxy();
  await t.waitHealthy();
  orders = (await t.client()).db('shop').collection('orders');
  await t.waitFeederCaughtUp();
  const got = await archive.find({ _id: /^k/ }).sort({ _id: 1 }).toArray();
  assert.deepEqual(got.map((d) => [d._id, d.n]), [['k0', 100], ...Array.from({ length: 9 }, (_, i) => [`k${i + 1}`, i + 1])]);
});
