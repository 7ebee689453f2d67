'use strict';
// Differential test of the tiering proxy against one plain store.
//
// The same seeded random sequence of writes (inserts, updates by _id and by filter,
// replaceOne, deletes, findOneAnd*) and reads (by _id, by date ranges below, across and
// above the horizon, without date bounds, count, distinct, aggregate with a leading
// $match; documents sometimes carry $-prefixed and dotted field names; an application
// index on the age field; a validator) runs against the proxy (a tiered collection with a 3 s horizon, so the evictor
// and the warmer are busy throughout) and against a plain `halocline store`. Every reply
// must be identical; after the feeder has caught up the archive must hold exactly the
// reference's documents, the fast tier only current copies of them, and no tombstone
// may be left. The same random operations, one to four at a time in transactions, must
// agree too (committed or not, outcome by outcome), retried whole when the proxy answers
// TransientTransactionError. HALO_FEEDER_MODE=lazy runs it with a lazy feeder
// (differential_lazy.test.js).
//
// Replay a failure with HALO_SEED=<seed printed in the message>.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const { startStore } = require('../lib/server');
const { startTiered, makeRng, chooseSeed, show, cleanupAll, waitUntil } = require('../lib/tiered');
const { WorkloadState, runOp, diffOutcome, diffDocs, describe, brief, byId } = require('../lib/workload');

const HORIZON_MS = 3000;
// differential_lazy.test.js runs the same with a lazy feeder.
const FEEDER_MODE = process.env.HALO_FEEDER_MODE || 'eager';
const SEED = chooseSeed();
const SEQ_OPS = Number(process.env.HALO_DIFF_OPS || 400);
const CONC_CLIENTS = 4;
const CONC_OPS = Number(process.env.HALO_DIFF_CONC_OPS || 120);
const ORDERS = 'shop.orders';
const EVENTS = 'shop.events';
const BULK = 'shop.bulk';

let t;
let ref;
let refClient;
let proxyClient;

const replay = () =>
  `seed ${SEED}, ${FEEDER_MODE} feeder (replay: HALO_SEED=${SEED} HALO_FEEDER_MODE=${FEEDER_MODE} node --test tiering/differential.test.js)`;

function collOf(client, ns) {
  const [db, coll] = ns.split('.');
  return client.db(db).collection(coll);
}

/** Same documents written straight into the archive and the reference before the proxy runs. */
async function preload(archiveClient, ns, docs, { validator } = {}) {
  for (const c of [archiveClient, refClient]) {
    if (validator) await c.db(ns.split('.')[0]).createCollection(ns.split('.')[1], { validator });
    const coll = collOf(c, ns);
    await coll.createIndex({ date: 1 });
    if (docs.length) await coll.insertMany(docs);
  }
}

before(async () => {
  t = await startTiered({
    collections: [ORDERS, EVENTS, BULK],
    horizon: HORIZON_MS,
    guard: '1s',
    startProxy: false,
    workers: {
      feeder: { mode: FEEDER_MODE, lazyDelay: '1m' },
      evictor: { interval: '100ms' },
      warmer: { interval: '200ms', batchSize: 50 },
    },
  });
  ref = await startStore({ replSet: 'rs0' }); // a replica set: transactions
  refClient = new MongoClient(ref.uri(), { serverSelectionTimeoutMS: 10_000 });
  await refClient.connect();

  // The archive starts with data (some of it inside the horizon, so the warmer has work);
  // the reference starts with the same.
  const archiveClient = await t.tierClient('archive');
  const seq = new WorkloadState({ rng: makeRng(SEED ^ 0x5eed), keys: 300, horizonMs: HORIZON_MS });
  const seen = new Set();
  const orders = [];
  for (let i = 0; i < 150; i++) {
    const d = seq.doc();
    if (!seen.has(d._id)) orders.push(d), seen.add(d._id);
  }
  // A validator the workload sometimes violates ($set of a non-numeric v): the proxy must
  // refuse exactly what the plain store refuses (121), and copies must never be refused.
  await preload(archiveClient, ORDERS, orders, {
    validator: { $jsonSchema: { properties: { v: { bsonType: ['int', 'long', 'double'] } } } },
  });
  const events = [];
  for (let w = 0; w < CONC_CLIENTS; w++) {
    const s = new WorkloadState({ rng: makeRng(SEED ^ (0x1000 + w)), w, keyBase: (w + 1) * 100_000, keys: 80, horizonMs: HORIZON_MS });
    const ids = new Set();
    for (let i = 0; i < 40; i++) {
      const d = s.doc();
      if (!ids.has(d._id)) events.push(d), ids.add(d._id);
    }
  }
  await preload(archiveClient, EVENTS, events);

  await t.startProxy();
  await t.waitHealthy();
  proxyClient = await t.client();
});

after(() => cleanupAll([refClient], [t, ref]));

/** Runs one op on both sides and fails with the seed and recent history on any difference. */
async function step(subject, reference, op, history, label) {
  history.push(op);
  if (history.length > 12) history.shift();
  const got = await runOp(subject, op);
  const want = await runOp(reference, op);
  const d = diffOutcome(got, want);
  if (d) {
    assert.fail(
      `${label}: reply differs from a plain store; ${replay()}\nop: ${brief(op)}\n${d}\n` +
        `previous ops (oldest first):\n${history.slice(0, -1).map((o) => brief(o, 600)).join('\n')}`,
    );
  }
  return got;
}

/**
 * After the feeder has caught up: archive == reference, every fast-tier document is the
 * reference's current version, reads through the proxy return the reference's contents,
 * and no tombstone remains.
 */
async function compareFinal(ns) {
  const status = await t.waitFeederCaughtUp();
  const want = (await collOf(refClient, ns).find().toArray()).sort(byId);
  const archive = (await t.tierDocs('archive', ns)).sort(byId);
  const archiveDiff = diffDocs(archive, want);
  assert.deepEqual(
    archiveDiff,
    [],
    `${ns}: the archive differs from the reference after the feeder caught up (${replay()}):\n${describe(archiveDiff)}\n` +
      `status: ${show(status.raw)}`,
  );
  const viaProxy = (await collOf(proxyClient, ns).find().toArray()).sort(byId);
  const proxyDiff = diffDocs(viaProxy, want);
  assert.deepEqual(proxyDiff, [], `${ns}: find({}) through the proxy differs from the reference (${replay()}):\n${describe(proxyDiff)}`);
  const fast = await t.tierDocs('fast', ns);
  const wantById = new Map(want.map((d) => [describe(d._id), d]));
  const stale = fast
    .filter((d) => describe(d) !== describe(wantById.get(describe(d._id)) ?? null))
    .map((d) => ({ fast: d, reference: wantById.get(describe(d._id)) ?? 'absent' }));
  assert.deepEqual(stale, [], `${ns}: the fast tier holds documents that are not the latest version (${replay()}):\n${describe(stale.slice(0, 10))}`);
  await t.waitGuardsGone(ns);
  const tomb = await t.tombstones(ns);
  assert.deepEqual(tomb, [], `${ns}: tombstones left after the feeder caught up: ${describe(tomb.slice(0, 10))}`);
  return { status, docs: want.length, fast: fast.length };
}

test('random operations through the proxy agree with a plain store, reply by reply', { timeout: 300_000 }, async () => {
  const rng = makeRng(SEED);
  const state = new WorkloadState({ rng, keys: 300, horizonMs: HORIZON_MS });
  const subject = collOf(proxyClient, ORDERS);
  const reference = collOf(refClient, ORDERS);
  const history = [];
  const counts = {};
  // Run at least four horizons so documents age out while the sequence runs.
  const started = Date.now();
  const minMs = 4 * HORIZON_MS;
  let i = 0;
  for (; (i < SEQ_OPS || Date.now() - started < minMs) && i < 5 * SEQ_OPS; i++) {
    const op = state.next();
    const got = await step(subject, reference, op, history, `sequential op #${i}`);
    const key = got.error ? `${op.name}!${got.code}` : op.name;
    counts[key] = (counts[key] || 0) + 1;
  }
  // The premise of the test: the workers really move documents. A fast build may
  // end the sequence before anything aged past the horizon; with no more writes,
  // the documents age out and the evictor must then remove some.
  await waitUntil('the evictor evicts documents that aged past the horizon', async () => (await t.status()).coll(ORDERS).evicted > 0);
  const final = await compareFinal(ORDERS);
  const coll = final.status.coll(ORDERS);
  assert.ok(coll.evicted > 0, `the evictor evicted nothing during the run (${replay()}): ${show(final.status.raw)}`);
  assert.ok(coll.warmed > 0, `the warmer warmed nothing during the run (${replay()}): ${show(final.status.raw)}`);
  const routed = coll.routing;
  assert.ok(routed.fast > 0 && routed.archive > 0, `reads went to only one tier (${replay()}): ${show(routed)}`);
  assert.ok(routed.merged > 0, `no archive-routed find was merged (${replay()}): ${show(routed)}`);
  assert.ok(routed.cold > 0, `no write ran in the archive (cold write) (${replay()}): ${show(routed)}`);
  process.stdout.write(
    `# differential: ${replay()}; ${i} ops in ${Date.now() - started} ms; ${final.docs} documents (${final.fast} in the fast tier); ` +
      `evicted ${coll.evicted}, warmed ${coll.warmed}, routed ${show(routed)}; ops ${show(counts)}\n`,
  );
});

/**
 * One transaction of `ops` on `client`: each op's outcome, and whether it committed. A
 * statement error ends it (as on mongod); a TransientTransactionError (112, 251) runs the
 * whole transaction again, as drivers' withTransaction does, up to `attempts` times.
 */
async function inTransaction(client, ns, ops, { attempts = 1 } = {}) {
  for (let attempt = 1; attempt <= attempts; attempt++) {
    const session = client.startSession();
    try {
      session.startTransaction();
      const outs = [];
      for (const op of ops) {
        const o = await runOp(collOf(client, ns), op, session);
        outs.push(o);
        if (o.error) break;
      }
      const last = outs[outs.length - 1];
      if (last.error) {
        await session.abortTransaction().catch(() => {});
        if (last.code === 112 || last.code === 251) continue;
        return { outs, committed: false, attempt };
      }
      await session.commitTransaction();
      return { outs, committed: true, attempt };
    } finally {
      await session.endSession();
    }
  }
  throw new Error(`a transaction kept failing with TransientTransactionError after ${attempts} attempts`);
}

test('random transactions through the proxy agree with a plain store, with the workers racing', { timeout: 300_000 }, async () => {
  const rng = makeRng(SEED ^ 0x7a7a);
  const state = new WorkloadState({ rng, keys: 300, horizonMs: HORIZON_MS });
  const history = [];
  const started = Date.now();
  let n = 0;
  let retried = 0;
  let committed = 0;
  for (; n < 60 || Date.now() - started < 3 * HORIZON_MS; n++) {
    if (n >= 300) break;
    const ops = [];
    for (let k = rng.int(1, 4); k > 0; k--) ops.push(state.next());
    history.push(ops);
    if (history.length > 6) history.shift();
    const got = await inTransaction(proxyClient, ORDERS, ops, { attempts: 20 });
    const want = await inTransaction(refClient, ORDERS, ops);
    retried += got.attempt - 1;
    if (got.committed) committed++;
    const d = got.committed === want.committed && got.outs.length === want.outs.length
      ? got.outs.map((o, i) => diffOutcome(o, want.outs[i])).find((x) => x)
      : `committed ${got.committed} after ${got.outs.length} ops, reference ${want.committed} after ${want.outs.length}`;
    if (d) {
      assert.fail(
        `transaction #${n}: differs from a plain store; ${replay()}\nops: ${ops.map((o) => brief(o)).join('\n     ')}\n${d}\n` +
          `previous transactions (oldest first):\n${history.slice(0, -1).map((t) => t.map((o) => brief(o, 300)).join(' ; ')).join('\n')}`,
      );
    }
  }
  const final = await compareFinal(ORDERS);
  assert.ok(committed > 0, 'no transaction committed');
  process.stdout.write(
    `# differential (transactions): ${replay()}; ${n} transactions, ${committed} committed, ${retried} transient retries; ` +
      `${final.docs} documents (${final.fast} in the fast tier)\n`,
  );
});

test('concurrent clients on disjoint key ranges each agree with a plain store', { timeout: 300_000 }, async () => {
  const clients = [];
  for (let w = 0; w < CONC_CLIENTS; w++) clients.push(await t.client({ maxPoolSize: 2 }));
  const started = Date.now();
  const perClient = await Promise.all(
    clients.map(async (c, w) => {
      const seed = SEED + 1 + w;
      const state = new WorkloadState({
        rng: makeRng(seed),
        w,
        keyBase: (w + 1) * 100_000,
        keys: 80,
        horizonMs: HORIZON_MS,
        scoped: true,
      });
      const subject = collOf(c, EVENTS);
      const reference = collOf(refClient, EVENTS);
      const history = [];
      let n = 0;
      for (; n < CONC_OPS || Date.now() - started < 2 * HORIZON_MS; n++) {
        if (n >= 5 * CONC_OPS) break;
        await step(subject, reference, state.next(), history, `client ${w} (seed ${seed}) op #${n}`);
      }
      return n;
    }),
  );
  const final = await compareFinal(EVENTS);
  process.stdout.write(
    `# differential (concurrent): ${replay()}; ops per client ${show(perClient)}; ${final.docs} documents, ${final.fast} in the fast tier\n`,
  );
});

test('bulk writes larger than one batch agree with a plain store', { timeout: 300_000 }, async () => {
  const rng = makeRng(SEED ^ 0xb01c);
  const state = new WorkloadState({ rng, keys: 100_000, horizonMs: HORIZON_MS });
  const subject = collOf(proxyClient, BULK);
  const reference = collOf(refClient, BULK);
  const history = [];
  // 1,100 distinct ids (the proxy promotes in chunks of 1,000), dates on both sides of
  // the horizon.
  // An application index on the age field, created through the proxy, works as on mongod
  // (the proxy's own age index in the fast tier makes way for it).
  assert.equal(await subject.createIndex({ date: 1 }), await reference.createIndex({ date: 1 }));
  const ids = [...new Set(Array.from({ length: 1150 }, () => state.key()))].slice(0, 1100);
  const docs = ids.map((id) => state.doc(id));
  const ops = [
    { name: 'insertMany', docs: docs.slice(0, 1050), ordered: true },
    // Overlapping the first batch: duplicate-key errors at the same indexes, the rest inserted.
    { name: 'insertMany', docs: docs.slice(1000), ordered: false },
    { name: 'find', filter: {} },
    { name: 'updateMany', filter: { cat: 0 }, update: { $inc: { v: 1000 } }, upsert: false },
    { name: 'updateMany', filter: { date: { $gte: new Date(Date.now() - HORIZON_MS) } }, update: { $set: { recent: true } }, upsert: false },
    { name: 'countDocuments', filter: { v: { $gte: 1000 } } },
    { name: 'deleteMany', filter: { cat: 1 } },
    { name: 'find', filter: { _id: { $in: ids.slice(0, 1050) } } },
    { name: 'aggregate', pipeline: [{ $match: { date: { $gte: new Date(0) } } }, { $group: { _id: '$cat', n: { $sum: 1 }, v: { $sum: '$v' } } }] },
    { name: 'deleteMany', filter: {} },
    { name: 'countDocuments', filter: {} },
  ];
  const timings = [];
  for (const [i, op] of ops.entries()) {
    const t0 = Date.now();
    await step(subject, reference, op, history, `bulk op #${i} (${op.name})`);
    timings.push(`${op.name} ${Date.now() - t0} ms`);
  }
  await compareFinal(BULK);
  process.stdout.write(`# differential (bulk): ${replay()}; ${timings.join(', ')}\n`);
});
