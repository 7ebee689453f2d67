'use strict';
// Cold start: the archive holds a "year" of documents (dates scaled to the horizon: the
// horizon stands for 30 days), the fast tier is empty, then the proxy starts. Queries
// favouring recent documents run continuously while the warmer fills the fast tier; every
// answer must equal the archive's (the archive is never written here, so its contents are
// the preload), the hit ratio reported by haloclineStatus must rise as warming progresses,
// and once warming is done the fast tier must hold every document inside the horizon.

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const { startTiered, makeRng, chooseSeed, show, waitUntil, durationMs } = require('../lib/tiered');

const SEED = chooseSeed();
const HORIZON = '30s';
const GUARD = '1s';
const H = durationMs(HORIZON);
const DAY = H / 30; // the horizon stands for 30 days
const YEAR = 365 * DAY;
const DOCS = 2400;
const NS = 'shop.orders';
const READERS = 3;

let t;
after(async () => {
  if (t) await t.cleanup();
});

const replay = () => `seed ${SEED} (replay: HALO_SEED=${SEED} node --test tiering/coldstart.test.js)`;

test('cold start: answers stay correct while warming, the hit ratio rises, the fast tier ends warm', { timeout: 300_000 }, async () => {
  const rng = makeRng(SEED);
  t = await startTiered({
    collections: [NS],
    horizon: HORIZON,
    guard: GUARD,
    startProxy: false,
    // Throttled so warming spans many queries.
    workers: { warmer: { batchSize: 20, maxDocsPerSecond: 60, interval: '200ms' } },
  });

  // The archive's year of orders.
  const now = Date.now();
  const docs = [];
  for (let i = 0; i < DOCS; i++) {
    docs.push({ _id: i, date: new Date(now - Math.floor(rng() * YEAR)), cust: rng.int(0, 99), total: rng.int(1, 500) });
  }
  const archiveClient = await t.tierClient('archive');
  const archiveColl = archiveClient.db('shop').collection('orders');
  await archiveColl.createIndex({ date: 1 });
  for (let i = 0; i < DOCS; i += 500) await archiveColl.insertMany(docs.slice(i, i + 500));
  const byId = new Map(docs.map((d) => [d._id, d]));
  const inHorizon = docs.filter((d) => d.date.getTime() > now - H);
  assert.ok(inHorizon.length > 50, `the preload has documents inside the horizon: ${inHorizon.length}`);
  assert.equal((await t.tierDocs('fast', NS)).length, 0, 'the fast tier starts empty');

  await t.startProxy();
  const client = await t.client();
  const orders = client.db('shop').collection('orders');

  // Recency-biased reads; each answer is checked against the preload.
  const violations = [];
  const counts = { byId: 0, range: 0, count: 0, old: 0, errors: 0 };
  let queries = 0;
  let stop = false;
  const recentId = () => {
    if (rng.chance(0.8)) return rng.pick(inHorizon)._id;
    return rng.chance(0.9) ? rng.int(0, DOCS - 1) : DOCS + rng.int(0, 100); // sometimes absent
  };
  const reader = async () => {
    while (!stop) {
      const kind = rng.weighted([
        [45, 'byId'],
        [30, 'range'],
        [15, 'count'],
        [10, 'old'],
      ]);
      try {
        if (kind === 'byId') {
          const id = recentId();
          const got = await orders.findOne({ _id: id });
          const want = byId.get(id) ?? null;
          if (show(got) !== show(want)) violations.push(`findOne({_id: ${id}}): got ${show(got)}, archive holds ${show(want)}`);
        } else if (kind === 'range' || kind === 'count') {
          const since = new Date(Date.now() - rng.int(1, 25) * DAY);
          const want = docs.filter((d) => d.date >= since).map((d) => d._id).sort((a, b) => a - b);
          if (kind === 'range') {
            const got = (await orders.find({ date: { $gte: since } }, { projection: { _id: 1 } }).toArray()).map((d) => d._id).sort((a, b) => a - b);
            if (show(got) !== show(want)) {
              const missing = want.filter((x) => !got.includes(x));
              const extra = got.filter((x) => !want.includes(x));
              violations.push(`find({date >= ${since.toISOString()}}): ${got.length} documents, archive has ${want.length}; missing ${show(missing.slice(0, 10))}, extra ${show(extra.slice(0, 10))}`);
            }
          } else {
            const got = await orders.countDocuments({ date: { $gte: since } });
            if (got !== want.length) violations.push(`countDocuments({date >= ${since.toISOString()}}) = ${got}, archive has ${want.length}`);
          }
        } else {
          const lo = new Date(now - rng.int(100, 300) * DAY);
          const hi = new Date(lo.getTime() + 10 * DAY);
          const want = docs.filter((d) => d.date >= lo && d.date < hi).length;
          const got = await orders.countDocuments({ date: { $gte: lo, $lt: hi } });
          if (got !== want) violations.push(`old-range count = ${got}, archive has ${want}`);
        }
        counts[kind]++;
      } catch (e) {
        counts.errors++;
        violations.push(`${kind} query failed: ${e.code ?? ''} ${e.message}`);
      }
      queries++;
    }
  };

  const readers = Array.from({ length: READERS }, () => reader());
  const samples = [];
  const sample = async (phase) => {
    const s = await t.status();
    const c = s.coll(NS);
    samples.push({ phase, queries, hitRatio: c.hitRatio, globalHitRatio: s.hitRatio, routing: c.routing, warmed: c.warmed, done: c.warmDone, low: c.warmLow });
    return s;
  };
  try {
    // First window: the first queries against an empty fast tier.
    await waitUntil('the first 40 queries', () => queries >= 40 || violations.length > 0, { timeoutMs: 60_000, abortIf: () => t.crashError() });
    const first = await sample('first');
    // Keep querying until the warmer has finished its pass, sampling along the way.
    await waitUntil(
      `the warm pass over ${NS} to finish`,
      async () => {
        const s = await sample('warming');
        return s.coll(NS).warmDone || violations.length > 20;
      },
      { timeoutMs: 120_000, intervalMs: 250, abortIf: () => t.crashError(), detail: () => `samples ${show(samples.slice(-5))}` },
    );
    const doneAt = await sample('done');
    // Last window: queries after the pass finished.
    const target = queries + 60;
    await waitUntil('60 queries after warming', () => queries >= target || violations.length > 20, { timeoutMs: 60_000, abortIf: () => t.crashError() });
    const last = await sample('last');

    stop = true;
    await Promise.all(readers);
    assert.deepEqual(violations.slice(0, 20), [], `${violations.length} wrong answers during warm-up (${replay()}); samples ${show(samples)}`);

    const ratio = (a, b) => {
      const f = b.routing.fast - a.routing.fast;
      const r = b.routing.archive - a.routing.archive;
      return f + r === 0 ? null : f / (f + r);
    };
    const f0 = first.coll(NS);
    const fEnd = last.coll(NS);
    const early = ratio({ routing: { fast: 0, archive: 0 } }, { routing: f0.routing });
    const late = ratio(doneAt.coll(NS), fEnd);
    // At most 8 evenly spaced samples in messages.
    const some = samples.filter((_, i) => samples.length <= 8 || i % Math.ceil(samples.length / 8) === 0 || i === samples.length - 1);
    const trace = `${replay()}; first window fast fraction ${early}, after warming ${late}; samples ${show(some)}`;
    assert.ok(f0.hitRatio !== null && fEnd.hitRatio !== null, `hitRatio reported: ${trace}`);
    assert.ok(fEnd.hitRatio > f0.hitRatio, `the hit ratio did not rise: ${f0.hitRatio} -> ${fEnd.hitRatio}; ${trace}`);
    assert.ok(early !== null && late !== null && late > early, `reads did not move to the fast tier as it warmed: ${trace}`);
    assert.ok(fEnd.warmed > 0, `warmed counter: ${trace}`);

    // The fast tier now holds every document inside the horizon (a margin of the guard for
    // the evictor's clock while we read), and only exact copies of archive documents.
    const cut = Date.now() - H + durationMs(GUARD);
    const fast = await t.tierDocs('fast', NS);
    const fastIds = new Set(fast.map((d) => d._id));
    const missing = docs.filter((d) => d.date.getTime() > cut && !fastIds.has(d._id)).map((d) => ({ _id: d._id, date: d.date }));
    assert.deepEqual(missing.slice(0, 10), [], `${missing.length} documents inside the horizon are not in the fast tier after warming; ${trace}`);
    const altered = fast.filter((d) => show(d) !== show(byId.get(d._id) ?? null));
    assert.deepEqual(altered.slice(0, 10), [], 'fast-tier documents that are not exact archive copies');
    const archiveNow = await t.tierDocs('archive', NS);
    assert.equal(archiveNow.length, DOCS, 'the archive is unchanged');
    process.stdout.write(`# coldstart: ${queries} queries ${show(counts)}; fast tier ${fast.length} docs, ${inHorizon.length} preloaded inside the horizon; ${trace}\n`);
  } finally {
    stop = true;
    await Promise.all(readers);
  }
});
