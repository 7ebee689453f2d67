'use strict';
// A tier ran a transaction's commitTransaction but its reply was lost (the connection broke
// in between, as when the tier is killed right after committing). The proxy must learn the
// outcome by retrying the commit, not redo the transaction: a redone delete finds nothing
// and would tell the client it deleted 0 documents although it deleted them.
//
// A relay between the proxy and the fast tier (lib/relay.js) drops the reply to the next
// commitTransaction and closes that connection. No workers run, so every commit is the
// client's write. A second relay in front of the archive does the same to a cold write
// (CONSISTENCY.md, Cold writes), whose command carries a session of the proxy's: the
// proxy's second attempt is a retry the archive answers from its record.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startTiered, show } = require('../lib/tiered');
const { startRelay } = require('../lib/relay');

const NS = 'shop.orders';
const OLD = new Date(Date.now() - 400 * 86_400_000);

let t;
let relay;
let archiveRelay;
let orders;
let archive;

before(async () => {
  t = await startTiered({ collections: [NS], horizon: '10m', workers: false, startProxy: false });
  relay = await startRelay(t.fast.port);
  t.routeTier('fast', relay.port);
  archiveRelay = await startRelay(t.archive.port);
  t.routeTier('archive', archiveRelay.port);
  await t.startProxy();
  const c = await t.client({ retryWrites: false });
  orders = c.db('shop').collection('orders');
  archive = (await t.tierClient('archive')).db('shop').collection('orders');
});
after(async () => {
  if (t) await t.cleanup();
  if (relay) await relay.close();
  if (archiveRelay) await archiveRelay.close();
});

test('a delete whose commit reply was lost reports the document it deleted', async () => {
  await orders.insertOne({ _id: 'a', date: new Date() });
  const lost = relay.dropReplyOnce('commitTransaction');
  const r = await orders.deleteOne({ _id: 'a' });
  await lost;
  assert.deepEqual(relay.dropped, ['commitTransaction'], 'the fault was injected');
  assert.equal(r.deletedCount, 1, show(r));
  assert.equal(await orders.findOne({ _id: 'a' }), null);
  assert.deepEqual(await t.tierDocs('fast', NS, { _id: 'a' }), []);
});

test('a deleteMany whose commit reply was lost counts every document it deleted', async () => {
  await orders.insertMany([1, 2, 3].map((i) => ({ _id: i, date: new Date() })));
  const lost = relay.dropReplyOnce('commitTransaction');
  const r = await orders.deleteMany({ _id: { $in: [1, 2, 3, 4] } });
  await lost;
  assert.equal(r.deletedCount, 3, show(r));
  assert.deepEqual(await t.tierDocs('fast', NS, { _id: { $in: [1, 2, 3] } }), []);
});

test('a delete of an archive document, with the replies to both the promotion and the delete lost, deletes it once', async () => {
  await archive.insertOne({ _id: 'old', date: OLD });
  relay.dropped.length = 0;
  const lost = Promise.all([relay.dropReplyOnce('commitTransaction'), relay.dropReplyOnce('commitTransaction')]);
  // `$in`: a delete naming one _id by equality would run in the archive instead
  // (CONSISTENCY.md, Cold writes); this one must promote the document first.
  const r = await orders.deleteOne({ _id: { $in: ['old'] } });
  await lost;
  assert.deepEqual(relay.dropped, ['commitTransaction', 'commitTransaction']);
  assert.equal(r.deletedCount, 1, show(r));
  assert.equal(await orders.findOne({ _id: 'old' }), null, 'the tombstone hides the archive copy');
  const tomb = (await t.tombstones(NS)).filter((x) => x._id.id === 'old');
  assert.equal(tomb.length, 1, `a tombstone for the archive copy (no feeder runs here to apply it): ${show(tomb)}`);
});

test('a cold update whose archive reply was lost is applied once, and reported', async () => {
  await archive.insertOne({ _id: 'cold', date: OLD, n: 0 });
  archiveRelay.dropped.length = 0;
  const lost = archiveRelay.dropReplyOnce('update');
  const r = await orders.updateOne({ _id: 'cold' }, { $inc: { n: 1 } });
  await lost;
  assert.deepEqual(archiveRelay.dropped, ['update'], 'the fault was injected');
  assert.deepEqual([r.matchedCount, r.modifiedCount], [1, 1], show(r));
  assert.equal((await archive.findOne({ _id: 'cold' })).n, 1, 'applied once');
  assert.deepEqual(await t.tierDocs('fast', NS, { _id: 'cold' }), [], 'written where it lives');
});
