'use strict';
// A soak run of the tiered system, driven by scripts/soak.sh (docs/OPERATIONS.md, Soak):
// two `halocline store --replSet` processes (fast, archive) and `halocline proxy` with its
// workers (feeder, evictor, warmer: in the proxy's process) in front of them, each on a
// free port (tests/js/lib/tiered.js), a short horizon so documents age out of the fast tier
// during the run, and a steady rate-limited mix of inserts, updates, deletes and reads
// through the proxy. Every --sample-seconds (60) it prints and records throughput, p99
// latency, and for each process its resident memory, open descriptors and threads, and the
// fast tier's size. At the end it applies the rules below and exits 0 (pass) or 1 (fail).
//
// The rules, over the readings from the end of the warm-up (the baseline) on:
//  - bound: no reading in the last third of the run exceeds the baseline by more than
//    RULES[series].bound (RSS, and each store's heap in use as tcmalloc counts it: 25% or
//    32 MiB, whichever is larger; descriptors: 25% or 16;
//    threads: 25% or 8; fast-tier documents: 50% or 1000, checked only when the warm-up
//    outlasts horizon + guard + 1 minute, i.e. eviction has reached its steady state);
//  - trend: with at least 5 readings, the series does not rise at every single step with an
//    overall rise above RULES[series].trend (RSS: 5% and 4 MiB; descriptors, threads: 1);
//  - no process exited on its own or printed a sanitizer report, no sample period without a
//    completed operation, and at most 1% of operations failed.

const fs = require('node:fs');
const path = require('node:path');
const { performance } = require('node:perf_hooks');
const { startTiered, durationMs, makeRng, chooseSeed, statusView } = require('../lib/tiered');

const MiB = 1024 * 1024;
const NS = { db: 'soak', coll: 'events' };

const USAGE = `usage: soak.js --minutes N [options]
  --minutes N          length of the run (required)
  --rate OPS           operations per second through the proxy (200)
  --concurrency C      client operations in flight at most (8)
  --horizon D          the tiered collection's horizon (2m)
  --guard D            tiering.clockSkewGuard (10s)
  --keys K             documents the workload keeps; then it deletes the oldest (20000)
  --warmup M           minutes before the baseline reading (N/4, between 1 and 10)
  --sample-seconds S   seconds between readings (60)
  --out FILE           per-reading JSON (and FILE.csv); default build/soak/soak-<time>.json
  --pids FILE          the processes' pids, one "name pid" a line, and "dir <data dir>" (for
                       the caller's cleanup should this runner be killed)
Environment: HALOCLINE_BIN (the binary), HALO_SEED (the workload's seed).`;

function parseArgs(argv) {
  const o = {
    minutes: null,
    rate: 200,
    concurrency: 8,
    horizon: '2m',
    guard: '10s',
    keys: 20000,
    warmup: null,
    sampleSeconds: 60,
    out: null,
    pids: null,
  };
  const numeric = { minutes: 1, rate: 1, concurrency: 1, keys: 1, warmup: 0, 'sample-seconds': 1 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-h' || a === '--help') {
      console.log(USAGE);
      process.exit(0);
    }
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(a);
    if (!m) throw new Error(`unexpected argument ${a}`);
    const name = m[1];
    const value = m[2] !== undefined ? m[2] : argv[++i];
    if (value === undefined) throw new Error(`--${name} needs a value`);
    const key = name.replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (!(key in o)) throw new Error(`unknown option --${name}`);
    if (name in numeric) {
      const n = Number(value);
      if (!Number.isInteger(n) || n < numeric[name]) throw new Error(`--${name} must be an integer >= ${numeric[name]}`);
      o[key] = n;
    } else {
      o[key] = value;
    }
  }
  if (o.minutes === null) throw new Error('--minutes is required');
  durationMs(o.horizon);
  durationMs(o.guard);
  if (o.warmup === null) o.warmup = Math.max(1, Math.min(10, Math.ceil(o.minutes / 4)));
  if (o.warmup >= o.minutes) throw new Error('--warmup must be shorter than --minutes');
  return o;
}

// ---------------------------------------------------------------------------------------
// The workload: a steady mix through the proxy, at most `rate` operations a second.

const OPS = [
  [25, 'insert'],
  [20, 'delete'],
  [15, 'update'],
  [20, 'findById'],
  [10, 'recentRange'],
  [5, 'byCategory'],
  [5, 'countRecent'],
];

class Workload {
  constructor(coll, { rng, keys, horizonMs }) {
    this.coll = coll;
    this.rng = rng;
    this.keys = keys;
    this.horizonMs = horizonMs;
    this.nextId = 1;
    this.live = []; // ids in insertion order, from `head` on
    this.head = 0;
    this.pad = 'x'.repeat(200);
  }

  liveCount() {
    return this.live.length - this.head;
  }

  randomLive() {
    const n = this.liveCount();
    return n ? this.live[this.head + this.rng.int(0, n - 1)] : 0;
  }

  takeOldest() {
    const id = this.live[this.head++];
    if (this.head > 4096 && this.head * 2 > this.live.length) {
      this.live = this.live.slice(this.head);
      this.head = 0;
    }
    return id;
  }

  async run() {
    const now = Date.now();
    let op = this.rng.weighted(OPS);
    // Inserts and deletes are one kind of operation: an insert while the collection holds
    // fewer than `keys` documents, else a delete of the oldest. So the collection (and the
    // archive) stays at `keys` documents, and each lives long enough (keys / (0.45 * rate)
    // seconds) to age out of the fast tier first.
    if (op === 'insert' || op === 'delete') op = this.liveCount() < this.keys ? 'insert' : 'delete';
    if (this.liveCount() === 0) op = 'insert';
    switch (op) {
      case 'insert': {
        const id = this.nextId++;
        // One in ten arrives already past the horizon: written to the fast tier, fed to the
        // archive, then evicted.
        const age = this.rng.chance(0.1) ? this.rng.int(this.horizonMs, 2 * this.horizonMs) : 0;
        await this.coll.insertOne({ _id: id, date: new Date(now - age), cat: this.rng.int(0, 9), v: 0, pad: this.pad });
        this.live.push(id);
        return op;
      }
      case 'delete':
        await this.coll.deleteOne({ _id: this.takeOldest() });
        return op;
      case 'update':
        await this.coll.updateOne({ _id: this.randomLive() }, { $inc: { v: 1 }, $set: { touched: new Date(now) } });
        return op;
      case 'findById':
        await this.coll.findOne({ _id: this.randomLive() });
        return op;
      case 'recentRange':
        await this.coll
          .find({ date: { $gte: new Date(now - this.horizonMs / 4) } })
          .sort({ date: -1 })
          .limit(20)
          .toArray();
        return op;
      case 'byCategory':
        await this.coll.find({ cat: this.rng.int(0, 9) }).limit(10).toArray();
        return op;
      case 'countRecent':
        await this.coll.countDocuments({ date: { $gte: new Date(now - this.horizonMs / 2) } });
        return op;
    }
    throw new Error(`unknown op ${op}`);
  }
}

/** Latencies and errors since the last take(). */
class Meter {
  constructor() {
    this.reset();
    this.totalOps = 0;
    this.totalErrors = 0;
    this.firstErrors = [];
  }

  reset() {
    this.latencies = [];
    this.errors = 0;
  }

  record(ms, err) {
    this.latencies.push(ms);
    this.totalOps++;
    if (err) {
      this.errors++;
      this.totalErrors++;
      if (this.firstErrors.length < 5) this.firstErrors.push(`${err.name}: ${err.message}`);
    }
  }

  take() {
    const l = this.latencies.sort((a, b) => a - b);
    const q = (p) => (l.length ? l[Math.min(l.length - 1, Math.floor(p * l.length))] : null);
    const out = { ops: l.length, errors: this.errors, p50Ms: q(0.5), p99Ms: q(0.99), maxMs: l.length ? l[l.length - 1] : null };
    this.reset();
    return out;
  }
}

/** `concurrency` loops sharing one schedule of `rate` operations a second. */
function startLoad(workload, meter, { rate, concurrency }) {
  const state = { stopping: false, next: performance.now() };
  const gap = 1000 / rate;
  const loop = async () => {
    while (!state.stopping) {
      const slot = state.next;
      state.next += gap;
      const now = performance.now();
      // Rate limiting, not synchronisation: wait for this operation's slot.
      if (slot > now) await new Promise((r) => setTimeout(r, slot - now));
      // Behind by more than a second (a stall): start afresh instead of bursting.
      else if (now - slot > 1000) state.next = now + gap;
      if (state.stopping) break;
      const t0 = performance.now();
      let err = null;
      try {
        await workload.run();
      } catch (e) {
        err = e;
      }
      meter.record(performance.now() - t0, err);
    }
  };
  const loops = Array.from({ length: concurrency }, loop);
  return {
    async stop() {
      state.stopping = true;
      await Promise.all(loops);
    },
  };
}

// ---------------------------------------------------------------------------------------
// Readings.

function procStatus(pid) {
  const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name) => {
    const m = new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(text);
    return m ? Number(m[1]) : null;
  };
  return {
    rssMiB: Math.round((field('VmRSS') / 1024) * 10) / 10,
    threads: field('Threads'),
    fds: fs.readdirSync(`/proc/${pid}/fd`).length,
  };
}

async function tierSize(client, metadataDb) {
  let stats = { count: 0, size: 0 };
  try {
    stats = await client.db(NS.db).command({ collStats: NS.coll });
  } catch (e) {
    if (e.code !== 26) throw e; // NamespaceNotFound: not created in this tier yet
  }
  const tombstones = await client.db(metadataDb).collection('tombstones').estimatedDocumentCount();
  // What the store's code holds (tcmalloc's allocated bytes, without the allocator's
  // free caches) and what of it is WiredTiger's cache: RSS minus these is allocator slack.
  const status = await client.db('admin').command({ serverStatus: 1 });
  const mib = (v) => (typeof v === 'number' || typeof v === 'bigint' ? Math.round((Number(v) / MiB) * 10) / 10 : null);
  const heapMiB = mib(status.tcmalloc?.generic?.current_allocated_bytes);
  const cacheMiB = mib(status.wiredTiger?.cache?.['bytes currently in the cache']);
  return { docs: stats.count, dataMiB: Math.round((stats.size / MiB) * 10) / 10, tombstones, heapMiB, cacheMiB };
}

// ---------------------------------------------------------------------------------------
// The verdict.

const RULES = {
  rssMiB: { bound: (b) => Math.max(b * 1.25, b + 32), trend: (b, last) => last - b > Math.max(b * 0.05, 4), what: 'RSS (MiB)' },
  fds: { bound: (b) => b + Math.max(b * 0.25, 16), trend: (b, last) => last - b >= 1, what: 'open descriptors' },
  threads: { bound: (b) => b + Math.max(b * 0.25, 8), trend: (b, last) => last - b >= 1, what: 'threads' },
  heapMiB: { bound: (b) => Math.max(b * 1.25, b + 32), trend: (b, last) => last - b > Math.max(b * 0.05, 4), what: 'heap in use (MiB, tcmalloc)' },
  fastDocs: { bound: (b) => Math.max(b * 1.5, b + 1000), trend: null, what: 'fast-tier documents + tombstones' },
};
const TREND_MIN_READINGS = 5;
const MAX_ERROR_RATE = 0.01;

function judge(samples, opts, meter, horizonMs, guardMs) {
  const failures = [];
  const notes = [];
  const base = samples.findIndex((s) => s.minute >= opts.warmup);
  const post = base < 0 ? [] : samples.slice(base);
  const series = [];
  for (const name of ['proxy', 'fast', 'archive']) {
    for (const key of ['rssMiB', 'fds', 'threads']) series.push({ label: `${name} ${RULES[key].what}`, rule: RULES[key], get: (s) => s.procs[name][key] });
  }
  for (const name of ['fast', 'archive']) {
    if (post.length && post[0][name] && post[0][name].heapMiB !== null && post[0][name].heapMiB !== undefined)
      series.push({ label: `${name} ${RULES.heapMiB.what}`, rule: RULES.heapMiB, get: (s) => (s[name] ? s[name].heapMiB : null) });
  }
  if (opts.warmup * 60_000 >= horizonMs + guardMs + 60_000) {
    series.push({
      label: `fast tier: ${RULES.fastDocs.what}`,
      rule: RULES.fastDocs,
      get: (s) => (s.fast.docs === null ? null : s.fast.docs + s.fast.tombstones),
    });
  } else {
    notes.push(`fast-tier size not judged: the warm-up (${opts.warmup} min) is shorter than horizon + guard + 1 min`);
  }
  if (post.length < 2) {
    notes.push(`memory and descriptor rules not judged: ${post.length} reading(s) after the warm-up`);
  } else {
    const lastThird = post.slice(1).slice(-Math.max(1, Math.ceil((post.length - 1) / 3)));
    for (const s of series) {
      // A failed reading has no tier figures (null): judged on the others.
      const b = s.get(post[0]);
      const last = lastThird.map(s.get).filter((v) => v !== null);
      if (b === null || last.length === 0) {
        notes.push(`${s.label}: not judged (readings failed)`);
        continue;
      }
      const limit = s.rule.bound(b);
      const worst = Math.max(...last);
      if (worst > limit) failures.push(`${s.label}: ${worst} in the last third exceeds the bound ${Math.round(limit * 10) / 10} (baseline ${b})`);
      if (s.rule.trend && post.length >= TREND_MIN_READINGS) {
        const values = post.map(s.get);
        const rising = values.every((v, i) => i === 0 || v > values[i - 1]);
        if (rising && s.rule.trend(values[0], values[values.length - 1]))
          failures.push(`${s.label}: rose at every reading after the warm-up (${values.join(' -> ')})`);
      }
    }
    if (post.length < TREND_MIN_READINGS) notes.push(`trend rule not judged: ${post.length} readings after the warm-up (needs ${TREND_MIN_READINGS})`);
  }
  for (const s of samples) if (s.error) failures.push(`the reading at minute ${s.minute} failed: ${s.error}`);
  const stalled = samples.filter((s) => s.ops === 0).map((s) => s.minute);
  if (stalled.length) failures.push(`no operation completed in the reading period(s) ending at minute ${stalled.join(', ')}`);
  const rate = meter.totalOps ? meter.totalErrors / meter.totalOps : 0;
  if (rate > MAX_ERROR_RATE)
    failures.push(`${meter.totalErrors} of ${meter.totalOps} operations failed (more than ${MAX_ERROR_RATE * 100}%): ${meter.firstErrors.join('; ')}`);
  else if (meter.totalErrors) notes.push(`${meter.totalErrors} of ${meter.totalOps} operations failed: ${meter.firstErrors.join('; ')}`);
  return { pass: failures.length === 0, failures, notes, baselineMinute: post.length ? post[0].minute : null };
}

// ---------------------------------------------------------------------------------------

function fmt(n, width, digits = 0) {
  const s = n === null || n === undefined ? '-' : Number(n).toFixed(digits);
  return s.padStart(width);
}

const HEADER =
  ' min   ops/s  p99ms  errs | RSS MiB: proxy   fast archive | fds: proxy fast arch | thr: proxy fast arch | fast docs tombst  MiB | archive docs | evicted backlog | heap MiB: fast arch | WT cache: fast arch';

function line(s) {
  const p = s.procs;
  return [
    fmt(s.minute, 4, s.minute % 1 ? 1 : 0),
    fmt(s.opsPerSec, 7, 1),
    fmt(s.p99Ms, 6, 1),
    fmt(s.errors, 5),
    ' |',
    fmt(p.proxy.rssMiB, 14, 1),
    fmt(p.fast.rssMiB, 6, 1),
    fmt(p.archive.rssMiB, 7, 1),
    ' |',
    fmt(p.proxy.fds, 11),
    fmt(p.fast.fds, 5),
    fmt(p.archive.fds, 5),
    ' |',
    fmt(p.proxy.threads, 10),
    fmt(p.fast.threads, 5),
    fmt(p.archive.threads, 5),
    ' |',
    fmt(s.fast.docs, 10),
    fmt(s.fast.tombstones, 7),
    fmt(s.fast.dataMiB, 5, 1),
    ' |',
    fmt(s.archive.docs, 13),
    ' |',
    fmt(s.evicted, 8),
    fmt(s.backlog, 8),
    ' |',
    fmt(s.fast && s.fast.heapMiB, 15, 1),
    fmt(s.archive && s.archive.heapMiB, 5, 1),
    ' |',
    fmt(s.fast && s.fast.cacheMiB, 15, 1),
    fmt(s.archive && s.archive.cacheMiB, 5, 1),
  ].join('');
}

function writeResults(file, doc) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(doc, null, 2)}\n`);
  const cols = ['minute', 'opsPerSec', 'p50Ms', 'p99Ms', 'errors'];
  const head = [...cols];
  for (const n of ['proxy', 'fast', 'archive']) head.push(`${n}RssMiB`, `${n}Fds`, `${n}Threads`);
  head.push('fastDocs', 'fastTombstones', 'fastDataMiB', 'archiveDocs', 'evicted', 'backlog', 'fastHeapMiB', 'archiveHeapMiB', 'fastCacheMiB', 'archiveCacheMiB');
  const rows = doc.samples.map((s) => {
    const r = cols.map((c) => s[c]);
    for (const n of ['proxy', 'fast', 'archive']) r.push(s.procs[n].rssMiB, s.procs[n].fds, s.procs[n].threads);
    r.push(s.fast.docs, s.fast.tombstones, s.fast.dataMiB, s.archive.docs, s.evicted, s.backlog);
    for (const n of ['fast', 'archive']) r.push(s[n] && s[n].heapMiB, s[n] && s[n].cacheMiB);
    return r.map((v) => (v === null || v === undefined ? '' : v)).join(',');
  });
  fs.writeFileSync(file.replace(/\.json$/, '') + '.csv', `${head.join(',')}\n${rows.map((r) => `${r}\n`).join('')}`);
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error(`soak: ${e.message}\n${USAGE}`);
    return 2;
  }
  const horizonMs = durationMs(opts.horizon);
  const guardMs = durationMs(opts.guard);
  const out = opts.out || path.resolve(__dirname, '../../../build/soak', `soak-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  const seed = chooseSeed();
  const ns = `${NS.db}.${NS.coll}`;
  console.log(
    `soak: ${opts.minutes} min, ${opts.rate} ops/s (${opts.concurrency} in flight), ${ns} horizon ${opts.horizon}, guard ${opts.guard}, ` +
      `keys ${opts.keys}, warm-up ${opts.warmup} min, a reading every ${opts.sampleSeconds}s, seed ${seed}`,
  );
  console.log(`soak: binary ${process.env.HALOCLINE_BIN || '(default)'}; results in ${out}`);

  const t = await startTiered({
    collections: [ns],
    horizon: opts.horizon,
    guard: opts.guard,
    // A small oplog, so each store's oplog reaches its cap (and memory its plateau) early.
    storeArgs: ['--oplogSize', '16'],
    readyTimeoutMs: 120_000,
  });
  const pids = { proxy: t.proxy.proc.pid, fast: t.fast.proc.pid, archive: t.archive.proc.pid };
  if (opts.pids) {
    const lines = Object.entries(pids).map(([n, p]) => `${n} ${p}\n`);
    fs.writeFileSync(opts.pids, `${lines.join('')}dir ${t.dir}\n`);
  }
  console.log(`soak: proxy (with the workers) pid ${pids.proxy} on ${t.uri()}, fast store pid ${pids.fast}, archive store pid ${pids.archive}`);

  const meter = new Meter();
  const samples = [];
  let load = null;
  let verdict = null;
  let failure = null;
  try {
    await t.waitHealthy();
    const client = await t.client({ maxPoolSize: opts.concurrency + 2 });
    // The readings' own clients, patient: a slow answer is a slow reading, not a failed one.
    const patient = { serverSelectionTimeoutMS: 30_000 };
    const fastClient = await t.tierClient('fast', patient);
    const archiveClient = await t.tierClient('archive', patient);
    const statusClient = await t.client(patient);
    const coll = client.db(NS.db).collection(NS.coll);
    await coll.createIndex({ date: 1 });
    await coll.createIndex({ cat: 1 });
    const workload = new Workload(coll, { rng: makeRng(seed), keys: opts.keys, horizonMs });
    const start = performance.now();
    load = startLoad(workload, meter, opts);
    console.log(HEADER);
    const periods = Math.floor((opts.minutes * 60) / opts.sampleSeconds);
    for (let i = 1; i <= periods; i++) {
      const due = start + i * opts.sampleSeconds * 1000;
      // The reading schedule (a timer, not synchronisation); a crash ends the run at once.
      while (performance.now() < due) {
        const crash = t.crashError();
        if (crash) throw crash;
        await new Promise((r) => setTimeout(r, Math.min(1000, due - performance.now())));
      }
      const elapsed = (performance.now() - start) / 1000;
      const m = meter.take();
      const sample = {
        minute: Math.round((elapsed / 60) * 10) / 10,
        at: new Date().toISOString(),
        opsPerSec: Math.round((m.ops / opts.sampleSeconds) * 10) / 10,
        ...m,
        procs: { proxy: procStatus(pids.proxy), fast: procStatus(pids.fast), archive: procStatus(pids.archive) },
        fast: { docs: null, dataMiB: null, tombstones: null, heapMiB: null, cacheMiB: null },
        archive: { docs: null, dataMiB: null, tombstones: null, heapMiB: null, cacheMiB: null },
        evicted: null,
        backlog: null,
        feederLagOps: null,
        liveDocs: workload.liveCount(),
      };
      // What the tiers report: a reading that fails (a tier too slow to answer within the
      // driver's timeouts) is recorded and fails the run at the end; the load goes on.
      try {
        const status = statusView(await statusClient.db('admin').command({ haloclineStatus: 1 }));
        const c = status.coll(ns);
        Object.assign(sample, { evicted: c.evicted, backlog: c.backlog, feederLagOps: status.feeder.lagOps });
        sample.fast = await tierSize(fastClient, t.metadataDatabase);
        sample.archive = await tierSize(archiveClient, t.metadataDatabase);
      } catch (e) {
        sample.error = `${e.name}: ${e.message}`;
      }
      samples.push(sample);
      console.log(line(sample));
      if (sample.error) console.log(`soak: the reading at minute ${sample.minute} failed: ${sample.error}`);
      writeResults(out, { options: opts, seed, pids, samples, verdict: null });
    }
  } catch (e) {
    failure = e;
  } finally {
    if (load) await load.stop();
  }
  let cleanupError = null;
  try {
    await t.cleanup();
  } catch (e) {
    cleanupError = e;
  }
  verdict = judge(samples, opts, meter, horizonMs, guardMs);
  if (failure) verdict.failures.unshift(`the run stopped early: ${failure.message}`);
  if (cleanupError) verdict.failures.push(`shutdown: ${cleanupError.message}`);
  verdict.pass = verdict.failures.length === 0;
  writeResults(out, { options: opts, seed, pids, samples, rules: describeRules(), verdict });
  console.log(`soak: ${meter.totalOps} operations, ${meter.totalErrors} failed; baseline: minute ${verdict.baselineMinute ?? '-'}`);
  for (const n of verdict.notes) console.log(`soak: note: ${n}`);
  for (const f of verdict.failures) console.log(`soak: FAIL: ${f}`);
  console.log(`soak: verdict: ${verdict.pass ? 'PASS' : 'FAIL'} (${out})`);
  return verdict.pass ? 0 : 1;
}

function describeRules() {
  return {
    bound: 'every reading in the last third <= bound(baseline): RSS and each store heap in use max(1.25b, b+32 MiB); fds b+max(0.25b,16); threads b+max(0.25b,8); fast docs+tombstones max(1.5b, b+1000)',
    trend: `with >= ${TREND_MIN_READINGS} readings after the warm-up: not rising at every reading (RSS and heap by > max(5%, 4 MiB) overall; fds, threads by >= 1)`,
    other: `no crash or sanitizer report; an operation completed in every period; at most ${MAX_ERROR_RATE * 100}% of operations failed`,
  };
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(`soak: ${e.stack || e}`);
    process.exit(2);
  },
);
