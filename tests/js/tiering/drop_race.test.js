'use strict';
// A drop of a tiered collection while a write to it is in flight in the proxy. The write
// copies an archive-only document up to the fast tier (a promotion) before it runs; if the
// drop ran between the promotion's archive read and its fast-tier insert, the dropped
// document would come back in the fast tier (and through the feeder in the archive), which
// one mongod never does. The proxy finishes its writes in flight before a drop and holds
// new ones until the drop is done (CONSISTENCY.md, drop). The promotion is held in the
// fast tier with a failCommand block, and the drop is sent while it is held.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startTiered, waitUntil, show } = require('../lib/tiered');

let t;

before(async () => {
  t = await startTiered({
    collections: ['shop.orders'],
    horizon: '1h',
    guard: '1s',
    storeArgs: ['--setParameter', 'enableTestCommands=1'],
  });
  await t.waitHealthy();
  await t.waitWarmDone('shop.orders');
});
after(async () => {
  if (t) await t.cleanup();
});

test('a drop sent while a write is copying a document up waits for it: the dropped document never comes back', { timeout: 120_000 }, async () => {
  const old = new Date(Date.now() - 30 * 86_400_000);
  const archive = (await t.directClient('archive')).db('shop').collection('orders');
  const fast = await t.directClient('fast');
  await archive.insertMany([{ _id: 1, date: old, x: 1 }, { _id: 2, date: old, x: 2 }]);

  const client = await t.client();
  const coll = client.db('shop').collection('orders');
  // The next insert the fast tier receives (the promotion's, inside its transaction, after
  // it read the archive) waits there until released.
  await fast.db('admin').command({
    configureFailPoint: 'failCommand',
    mode: { times: 1 },
    data: { failCommands: ['insert'], blockConnection: true, blockTimeMS: 3000 },
  });
  try {
    // A range filter: no single-_id cold write, the document is promoted first.
    const update = coll.updateOne({ _id: { $gt: 1 } }, { $inc: { x: 10 } });
    await waitUntil('the promotion to be held in the fast tier', async () => {
      const ops = await fast.db('admin').aggregate([{ $currentOp: {} }, { $match: { 'command.insert': { $exists: true } } }]).toArray();
      return ops.length > 0;
    });
    const [updated, dropped] = await Promise.all([update, coll.drop()]);
    assert.equal(updated.matchedCount, 1, show(updated));
    assert.equal(dropped, true);
  } finally {
    await fast.db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
  }
  await client.db('admin').command({ haloclineFlushFeeder: 1 });
  assert.deepEqual(await coll.find().toArray(), [], 'a dropped document came back through the proxy');
  assert.deepEqual(await fast.db('shop').collection('orders').find().toArray(), [], 'a dropped document came back in the fast tier');
  assert.deepEqual(await archive.find().toArray(), [], 'a dropped document came back in the archive');
  // The ids are free again, through the proxy's duplicate check against the archive.
  await coll.insertMany([{ _id: 1, date: new Date() }, { _id: 2, date: new Date() }]);
  assert.equal(await coll.countDocuments({}), 2);
});
