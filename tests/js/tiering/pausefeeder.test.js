'use strict';
// An operator pauses the feeder (haloclinePauseFeeder, docs/OPERATIONS.md): it applies
// nothing while paused, and what does not need it goes on: writes of every kind (new
// documents, fast-tier documents, cold writes of archive-only ones, deletes), `_id`
// lookups and merged finds, each seeing the writes before it. Reads that must wait for the
// feeder give up with 262 within causalWaitTimeout, never answer stale. Resumed, it
// catches up, and the archive gets every write.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startTiered, waitUntil, show } = require('../lib/tiered');
const { expectServerError } = require('../lib/fixture');

const NS = 'shop.orders';
const OLD = new Date(Date.now() - 400 * 86_400_000);
let t;
let admin;
let orders;
let archive;

before(async () => {
  t = await startTiered({ collections: [NS], horizon: '10m', causalWaitTimeout: '1s', startProxy: false });
  const docs = [];
  for (let i = 0; i < 50; i++) docs.push({ _id: i, date: new Date(OLD.getTime() + i * 1000), kind: i % 3, n: i });
  docs.push({ _id: 'recent', date: new Date(Date.now() - 60_000), kind: 2, n: 0 }); // warmed up
  await (await t.tierClient('archive')).db('shop').collection('orders').insertMany(docs);
  await t.startProxy();
  await t.waitHealthy();
  await t.waitWarmDone(NS);
  const c = await t.client();
  admin = c.db('admin');
  orders = c.db('shop').collection('orders');
  archive = (await t.directClient('archive')).db('shop').collection('orders');
});
after(async () => {
  if (t) await t.cleanup();
});

test('haloclinePauseFeeder takes a pause in milliseconds, 0 to resume', async () => {
  await expectServerError(admin.command({ haloclinePauseFeeder: -1 }), 2);
  await expectServerError(admin.command({ haloclinePauseFeeder: 'soon' }), 2);
  const r = await admin.command({ haloclinePauseFeeder: 0 });
  assert.equal(r.pausedUntil, null, show(r));
});

test('while the feeder is paused, writes, _id lookups and merged finds go on; waiting reads give up with 262; resumed, it catches up', async () => {
  const r = await admin.command({ haloclinePauseFeeder: 600_000 });
  assert.ok(r.pausedUntil instanceof Date && r.pausedUntil > new Date(), show(r));
  await waitUntil('the feeder to take the pause', async () => (await t.status()).feeder.pausedUntil !== null);

  const now = new Date();
  await orders.insertOne({ _id: 'new', date: now, kind: 1, n: 1 });
  await orders.updateOne({ _id: 'new' }, { $inc: { n: 10 } });
  const cold = await orders.updateOne({ _id: 3 }, { $inc: { n: 100 } }); // archive-only: runs there
  assert.equal(cold.modifiedCount, 1);
  assert.equal((await orders.deleteOne({ _id: 4 })).deletedCount, 1); // archive-only: runs there
  assert.equal((await orders.deleteOne({ _id: 'recent' })).deletedCount, 1); // in both: a tombstone

  assert.equal((await orders.findOne({ _id: 'new' })).n, 11);
  assert.equal((await orders.findOne({ _id: 3 })).n, 103);
  assert.equal(await orders.findOne({ _id: 4 }), null);
  assert.equal(await orders.findOne({ _id: 'recent' }), null);
  const merged = await orders.find({ kind: 1 }).sort({ n: -1 }).limit(2).project({ n: 1 }).toArray();
  assert.deepEqual(merged, [{ _id: 49, n: 49 }, { _id: 46, n: 46 }]);
  const mergedNew = await orders.find({ kind: 1, n: { $lt: 12 } }).sort({ n: -1 }).limit(2).toArray();
  assert.deepEqual(mergedNew.map((d) => d._id), ['new', 10]);
  const withNew = await orders.find({ _id: { $in: ['new', 4, 5] } }).sort({ _id: 1 }).limit(5).toArray();
  assert.deepEqual(withNew.map((d) => d._id), [5, 'new']);
  // A merged count sees the writes; a $group by a field cannot be merged: it must wait for
  // the feeder, and gives up rather than answer without the writes.
  assert.equal(await orders.countDocuments({ kind: 1 }), 17); // 16 old (ids 1, 4, ..., 49 minus 4) + 'new'
  await expectServerError(orders.aggregate([{ $match: { kind: 1 } }, { $group: { _id: '$kind', n: { $sum: 1 } } }]).toArray(), 262);

  // Nothing reached the archive through the feeder (the cold writes were made there).
  assert.equal(await archive.findOne({ _id: 'new' }), null);
  assert.equal((await archive.findOne({ _id: 'recent' }))._id, 'recent');
  assert.equal(await archive.findOne({ _id: 4 }), null);
  assert.equal((await archive.findOne({ _id: 3 })).n, 103);

  const resumed = await admin.command({ haloclinePauseFeeder: 0 });
  assert.equal(resumed.pausedUntil, null);
  await t.waitFeederCaughtUp();
  assert.equal((await t.status()).feeder.pausedUntil, null);
  assert.equal((await archive.findOne({ _id: 'new' })).n, 11);
  assert.equal(await archive.findOne({ _id: 'recent' }), null);
  const grouped = await orders.aggregate([{ $match: { kind: 1 } }, { $group: { _id: '$kind', n: { $sum: 1 } } }]).toArray();
  assert.deepEqual(grouped, [{ _id: 1, n: 17 }]);
});
