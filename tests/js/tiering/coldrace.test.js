'use strict';
// A promotion and a cold write of the same document, interleaved the one way that can
// lose a write (docs/CONSISTENCY.md, Cold writes, "A promotion that read the archive
// before the write"): the promotion reads the old version from the archive, a cold write
// changes the archive's copy and finishes, and only then does the promotion try to copy
// its old version up. The cold write's mark must make the promotion read again.
//
// A relay in front of the archive (lib/relay.js) holds the reply to the promotion's
// archive read until the cold write is done. No workers run, so every archive read is
// the client's.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startTiered, show } = require('../lib/tiered');
const { startRelay } = require('../lib/relay');

const NS = 'shop.orders';
const OLD = new Date(Date.now() - 400 * 86_400_000);

let t;
let archiveRelay;
let orders;
let archive;
let fast;

before(async () => {
  t = await startTiered({ collections: [NS], horizon: '10m', workers: false, startProxy: false });
  archiveRelay = await startRelay(t.archive.port);
  t.routeTier('archive', archiveRelay.port);
  await t.startProxy();
  orders = (await t.client()).db('shop').collection('orders');
  archive = (await t.tierClient('archive')).db('shop').collection('orders');
  fast = (await t.directClient('fast')).db('shop').collection('orders');
});
after(async () => {
  if (t) await t.cleanup();
  if (archiveRelay) await archiveRelay.close();
});

test('a promotion that read the archive before a cold write does not copy the old version up', async () => {
  await archive.insertOne({ _id: 'x', date: OLD, n: 0 });
  const marksBefore = await t.coldKeys(NS, 'mark');
  assert.deepEqual(marksBefore, []);

  // An update that moves the age copies the document up: its promotion reads the whole
  // document from the archive (the proxy's other archive find asks for _id alone).
  const held = archiveRelay.holdReplyOnce('find', (cmd) => cmd && !cmd.projection);
  const now = new Date();
  const promoting = orders.updateOne({ _id: 'x' }, { $set: { date: now } });
  await held.arrived; // the archive has answered the promotion's read: n is 0 in it

  // Meanwhile an update that leaves the age alone runs in the archive, and finishes.
  const cold = await orders.updateOne({ _id: 'x' }, { $inc: { n: 1 } });
  assert.deepEqual([cold.matchedCount, cold.modifiedCount], [1, 1], show(cold));
  assert.equal((await archive.findOne({ _id: 'x' })).n, 1);
  await t.waitGuardsGone(NS);
  const marks = await t.coldKeys(NS, 'mark');
  assert.equal(marks.length, 1, show(marks));
  assert.equal(marks[0]._id.id, 'x');

  // Now the promotion goes on with the version it read: it must not copy n: 0 up.
  held.release();
  const r = await promoting;
  assert.deepEqual([r.matchedCount, r.modifiedCount], [1, 1], show(r));
  assert.deepEqual(await fast.findOne({ _id: 'x' }), { _id: 'x', date: now, n: 1 }, 'both writes');
  assert.deepEqual(await orders.findOne({ _id: 'x' }), { _id: 'x', date: now, n: 1 });
  // The promotion that finally copied it up replaced the mark.
  assert.deepEqual(await t.coldKeys(NS, 'mark'), []);
  assert.deepEqual(await t.tombstones(NS), []);
});
