'use strict';
// The warmer's pass over an archive whose ages tie in long runs (longer than a
// batch) and cluster unevenly, so batches cut through ties (tiering/warmer.cpp).
// Whatever it publishes as its low must be true when published (every archive
// document newer than it is in the fast tier), and the finished pass leaves
// every document inside the horizon in the fast tier, exactly as in the archive.

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const { startTiered, makeRng, chooseSeed, show, waitUntil, durationMs } = require('../lib/tiered');

const SEED = chooseSeed();
const HORIZON = '60s';
const GUARD = '1s';
const H = durationMs(HORIZON);
const NS = 'shop.events';

let t;
after(async () => {
  if (t) await t.cleanup();
});

test('the warm pass claims only what the fast tier holds, through ties, dense runs and gaps', { timeout: 180_000 }, async () => {
  const rng = makeRng(SEED);
  const replay = `seed ${SEED} (replay: HALO_SEED=${SEED} node --test tiering/warmer.test.js)`;
  t = await startTiered({
    collections: [NS],
    horizon: HORIZON,
    guard: GUARD,
    startProxy: false,
    // Batches shorter than the longest runs of one age; slowed so that the
    // pass spans many status samples.
    workers: { warmer: { batchSize: 20, maxDocsPerSecond: 400, interval: '200ms' } },
  });
  const now = Date.now();
  const docs = [];
  let id = 0;
  // Runs of equal dates (up to 30 documents on one millisecond), a dense
  // newest tenth, a gap, then sparse older ones; and some older than the horizon.
  const addRun = (date, n) => {
    for (let i = 0; i < n; i++) docs.push({ _id: id++, date: new Date(date), v: rng.int(0, 1e6) });
  };
  for (let r = 0; r < 40; r++) addRun(now - 2_000 - rng.int(0, H / 10), rng.int(1, 30));
  for (let r = 0; r < 60; r++) addRun(now - H / 2 - rng.int(0, H / 3), rng.int(1, 4));
  for (let r = 0; r < 20; r++) addRun(now - H - 5_000 - rng.int(0, H), rng.int(1, 5));
  const archive = (await t.tierClient('archive')).db('shop').collection('events');
  await archive.createIndex({ date: 1 });
  for (let i = 0; i < docs.length; i += 500) await archive.insertMany(docs.slice(i, i + 500));
  assert.equal((await t.tierDocs('fast', NS)).length, 0, 'the fast tier starts empty');

  await t.startProxy();
  const byId = new Map(docs.map((d) => [d._id, d]));
  const claims = [];
  // While the pass runs: what the status says is warmed must be in the fast
  // tier (read after the status, so nothing it claimed can be missing yet).
  const checkClaim = async () => {
    const s = await t.status();
    const c = s.coll(NS);
    const low = c.warmLow === null || c.warmLow === undefined ? null : new Date(c.warmLow).getTime();
    const fastIds = new Set((await t.tierDocs('fast', NS)).map((d) => d._id));
    // The evictor may take what ages past the horizon meanwhile: leave a margin.
    const floor = Math.max(low ?? Infinity, Date.now() - H + durationMs(GUARD) + 2_000);
    if (low !== null) {
      const missing = docs.filter((d) => d.date.getTime() > floor && !fastIds.has(d._id));
      claims.push({ low, done: c.warmDone, fast: fastIds.size, missing: missing.length });
      assert.deepEqual(
        missing.slice(0, 5).map((d) => ({ _id: d._id, date: d.date })),
        [],
        `the warmer claimed low ${new Date(low).toISOString()} with ${missing.length} newer documents not in the fast tier; ${replay}`,
      );
    }
    return c.warmDone;
  };
  await waitUntil(`the warm pass over ${NS} to finish`, checkClaim, { timeoutMs: 120_000, intervalMs: 100, abortIf: () => t.crashError() });
  assert.ok(claims.length >= 3, `the pass was sampled while it ran: ${show(claims)}`);

  const cut = Date.now() - H + durationMs(GUARD);
  const fast = await t.tierDocs('fast', NS);
  const fastIds = new Set(fast.map((d) => d._id));
  const missing = docs.filter((d) => d.date.getTime() > cut && !fastIds.has(d._id));
  assert.deepEqual(missing.slice(0, 10), [], `${missing.length} documents inside the horizon are not in the fast tier; ${replay}`);
  const altered = fast.filter((d) => show(d) !== show(byId.get(d._id) ?? null));
  assert.deepEqual(altered.slice(0, 10), [], 'fast-tier documents that are not exact archive copies');
  const status = await t.status();
  assert.ok(status.coll(NS).warmed >= docs.filter((d) => d.date.getTime() > cut).length, `warmed counter: ${show(status.coll(NS))}`);
});
