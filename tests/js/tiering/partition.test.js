'use strict';
// Network partitions between the proxy and each tier (issue 17), made by relays the test
// controls (lib/relay.js): blackhole (connections accepted, nothing ever answered) and
// reset (every connection refused). While only the archive is cut off, writes that need
// nothing from it go on (updates of documents the fast tier holds) and reads the fast tier
// answers go on; operations that need the archive (a read of an archive-only document, an
// insert's duplicate check, a write of an archive-only document) fail within their
// maxTimeMS (blackhole) or at once (reset), and never hang. While the fast tier is cut
// off, writes fail the same way. After each partition heals, nothing half-done is left:
// the operations that failed succeed when repeated, no cold-write guard remains once the
// document is written again, and the feeder brings the archive level with the fast tier.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startTiered, show } = require('../lib/tiered');
const { startRelay } = require('../lib/relay');

const NS = 'shop.orders';
const OLD = new Date(Date.now() - 400 * 86_400_000);
const MAX_TIME_MS = 1500;
// How far past its maxTimeMS an operation may end: the proxy's margin for the tier's own
// reply (500 ms) and scheduling on a loaded machine. A hang would exceed any bound.
const LATE_MS = 4000;

let t;
let archiveRelay;
let fastRelay;
let orders;
let archive;

before(async () => {
  t = await startTiered({ collections: [NS], horizon: '10m', startProxy: false });
  archiveRelay = await startRelay(t.archive.port);
  fastRelay = await startRelay(t.fast.port);
  t.routeTier('archive', archiveRelay.port);
  t.routeTier('fast', fastRelay.port);
  await t.startProxy();
  await t.waitHealthy();
  // Retries off: each operation is one attempt, so its failure is the proxy's answer.
  orders = (await t.client({ retryWrites: false, retryReads: false })).db('shop').collection('orders');
  archive = (await t.tierClient('archive')).db('shop').collection('orders');
  await archive.insertMany([1, 2, 3, 4].map((i) => ({ _id: `old${i}`, date: OLD, n: 0 })));
  await orders.insertMany([1, 2, 3, 4].map((i) => ({ _id: `new${i}`, date: new Date(), n: 0 })));
  await t.waitFeederCaughtUp();
});

after(async () => {
  if (t) await t.cleanup();
  if (archiveRelay) await archiveRelay.close();
  if (fastRelay) await fastRelay.close();
});

/** Runs op, which must fail; returns the error and how long it took. */
async function failing(what, op) {
  const started = Date.now();
  try {
    const r = await op();
    assert.fail(`${what}: succeeded during the partition: ${show(r)}`);
  } catch (e) {
    if (e instanceof assert.AssertionError) throw e;
    return { e, ms: Date.now() - started };
  }
}

/**
 * Heals the partition, repeats what failed (`redo`), then checks that nothing is left
 * behind: no cold-write guard (a write the archive may or may not have run keeps its
 * guard until the next write of that document finishes it: its outcome was unknown to the
 * client, as after any network error) and an archive level with the fast tier.
 */
async function healedAndLevel(relay, redo) {
  relay.heal();
  await t.waitHealthy();
  await redo();
  await t.waitGuardsGone(NS);
  await t.waitFeederCaughtUp();
  const fastDocs = await t.tierDocs('fast', NS, { _id: /^new/ });
  const archived = await t.tierDocs('archive', NS, { _id: /^new/ });
  assert.deepEqual(archived, fastDocs, 'the archive holds what the fast tier holds once the feeder caught up');
}

test('archive blackholed: fast-tier work goes on, archive work fails within maxTimeMS, all heals', async () => {
  archiveRelay.blackhole();
  const opts = { maxTimeMS: MAX_TIME_MS };

  // Needs nothing from the archive.
  const u = await orders.updateOne({ _id: 'new1' }, { $inc: { n: 1 } }, opts);
  assert.equal(u.modifiedCount, 1, show(u));
  assert.equal((await orders.findOne({ _id: 'new1' }, opts)).n, 1);

  // Needs the archive: fails within its time, never hangs.
  for (const [what, op] of [
    ['read of an archive-only document', () => orders.findOne({ _id: 'old1' }, opts)],
    ['insert (the duplicate check asks the archive)', () => orders.insertOne({ _id: 'fresh1', date: new Date() }, opts)],
    ['update of an archive-only document', () => orders.updateOne({ _id: 'old2' }, { $inc: { n: 1 } }, opts)],
  ]) {
    const { e, ms } = await failing(what, op);
    assert.ok(ms < MAX_TIME_MS + LATE_MS, `${what}: failed after ${ms} ms (maxTimeMS ${MAX_TIME_MS}): ${e}`);
    assert.equal(e.code, 50, `${what}: MaxTimeMSExpired, got ${show({ code: e.code, message: e.message })}`);
  }

  await healedAndLevel(archiveRelay, async () => {
    assert.deepEqual(await orders.findOne({ _id: 'old1' }), { _id: 'old1', date: OLD, n: 0 });
    await orders.insertOne({ _id: 'fresh1', date: new Date() });
    const again = await orders.updateOne({ _id: 'old2' }, { $inc: { n: 1 } });
    assert.equal(again.modifiedCount, 1, show(again));
  });
  // The failed attempt's outcome was unknown: applied (by its guard's completion) or not.
  assert.ok([1, 2].includes((await orders.findOne({ _id: 'old2' })).n));
});

test('archive refusing connections: fast-tier work goes on, archive work fails at once, all heals', async () => {
  archiveRelay.reset();
  const u = await orders.updateOne({ _id: 'new2' }, { $inc: { n: 1 } });
  assert.equal(u.modifiedCount, 1, show(u));

  for (const [what, op] of [
    ['read of an archive-only document', () => orders.findOne({ _id: 'old3' })],
    ['insert', () => orders.insertOne({ _id: 'fresh2', date: new Date() })],
    ['update of an archive-only document', () => orders.updateOne({ _id: 'old4' }, { $inc: { n: 1 } })],
  ]) {
    const { e } = await failing(what, op);
    // A network error of the proxy's (HostUnreachable), which drivers may retry.
    assert.equal(e.code, 6, `${what}: HostUnreachable, got ${show({ code: e.code, message: e.message })}`);
  }

  await healedAndLevel(archiveRelay, async () => {
    assert.deepEqual(await orders.findOne({ _id: 'old3' }), { _id: 'old3', date: OLD, n: 0 });
    await orders.insertOne({ _id: 'fresh2', date: new Date() });
    assert.equal((await orders.updateOne({ _id: 'old4' }, { $inc: { n: 1 } })).modifiedCount, 1);
  });
  assert.ok([1, 2].includes((await orders.findOne({ _id: 'old4' })).n));
});

test('fast tier blackholed: writes fail within maxTimeMS and leave nothing behind', async () => {
  fastRelay.blackhole();
  const opts = { maxTimeMS: MAX_TIME_MS };
  for (const [what, op] of [
    ['update of a fast-tier document', () => orders.updateOne({ _id: 'new3' }, { $inc: { n: 1 } }, opts)],
    ['update of an archive-only document', () => orders.updateOne({ _id: 'old1' }, { $inc: { n: 10 } }, opts)],
    ['insert', () => orders.insertOne({ _id: 'fresh3', date: new Date() }, opts)],
  ]) {
    const { e, ms } = await failing(what, op);
    assert.ok(ms < MAX_TIME_MS + LATE_MS, `${what}: failed after ${ms} ms (maxTimeMS ${MAX_TIME_MS}): ${e}`);
  }

  await healedAndLevel(fastRelay, async () => {
    const n3 = (await orders.findOne({ _id: 'new3' })).n;
    assert.ok([0, 1].includes(n3), `new3: n ${n3}`);
    assert.equal((await orders.updateOne({ _id: 'new3' }, { $inc: { n: 1 } })).modifiedCount, 1);
    assert.equal((await orders.findOne({ _id: 'new3' })).n, n3 + 1);
    assert.equal((await orders.updateOne({ _id: 'old1' }, { $inc: { n: 10 } })).modifiedCount, 1);
    await orders.insertOne({ _id: 'fresh3', date: new Date() });
  });
});
