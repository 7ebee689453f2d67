'use strict';
// Crash faults under load: two proxies in front of the tiers (one holds the worker lease,
// the other stands by; the clients' connection string lists both, as for mongos routers).
// Kill -9 the worker leader, the standby, the fast store and the archive store, one at a
// time at random points, restarting each, and pause the feeder for a few seconds
// (haloclinePauseFeeder: durable, so it outlives a proxy killed meanwhile), while writers
// keep inserting, incrementing, replacing, deleting and reading with exact bookkeeping of
// what was acknowledged. HALO_FAULT_ROUNDS rounds of one fault each (default 8 with an
// eager feeder: 32 kills and 8 pauses; 2 with a lazy one); the history's counts and the
// checker's verdict are printed at the end.
//
// A write that fails in any way has an unknown outcome (it may or may not have applied)
// and its document is left alone afterwards. Half the writers use retryable writes (a
// retried write must apply once), half do not (so unknown outcomes really occur). After recovery and feeder catch-up:
//  - the archive holds exactly the acknowledged state (unknown outcomes either way),
//  - nothing acknowledged is lost, no acknowledged delete is undone,
//  - every fast-tier document equals the archive's copy (no stale version anywhere),
//  - reads through the proxy (by _id and archive-routed) agree with the same state.
// Reads during the load are checked against the same bookkeeping (read-your-writes,
// including right after a restart of the proxy).
//
// HALO_FEEDER_MODE=lazy runs it with a lazy feeder (fault_lazy.test.js): the archive then
// lags on purpose, and reads that cannot be merged ask the feeder for its gathering.
//
// Replay a failure's schedule and workload with HALO_SEED=<seed printed in the message>.

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { MongoClient } = require('mongodb');
const { startTiered, ProxyServer, makeRng, chooseSeed, waitUntil, show, isNetworkError, durationMs } = require('../lib/tiered');

const SEED = chooseSeed();
const FEEDER_MODE = process.env.HALO_FEEDER_MODE || 'eager';
const HORIZON = '2s';
const H = durationMs(HORIZON);
const WRITERS = 4;
const ROUNDS = Number(process.env.HALO_FAULT_ROUNDS || (FEEDER_MODE === 'lazy' ? 2 : 8));
const NS = 'shop.orders';
const LEASE_MS = 3000;

let t;
let proxyB;
after(async () => {
  try {
    if (proxyB) await proxyB.stop(); // throws on a crash or a sanitizer report
  } finally {
    if (t) await t.cleanup();
  }
});

const replay = () =>
  `seed ${SEED}, ${FEEDER_MODE} feeder, ${ROUNDS} rounds (replay: HALO_SEED=${SEED} HALO_FEEDER_MODE=${FEEDER_MODE} HALO_FAULT_ROUNDS=${ROUNDS} node --test tiering/fault.test.js)`;

/** A proxy's worker role ('leader' or 'standby'), or null when it does not answer. */
async function roleOf(proxy) {
  const c = new MongoClient(proxy.uri(), { serverSelectionTimeoutMS: 5000 });
  try {
    return (await c.db('admin').command({ haloclineStatus: 1 })).workers.role;
  } catch {
    return null;
  } finally {
    await c.close();
  }
}

/**
 * Per-document bookkeeping. `states` lists the states the document may be in: exactly one
 * while every write to it was acknowledged; two after a write with an unknown outcome
 * (after which the writer never touches it again). A state is null (absent) or {n}.
 */
class Book {
  constructor() {
    this.docs = new Map(); // id -> {date, states: [null | {n}], settled: bool}
  }

  live(id) {
    const d = this.docs.get(id);
    return d && d.settled && d.states[0] !== null;
  }

  liveIds() {
    return [...this.docs.keys()].filter((id) => this.live(id));
  }

  acked(id, state, where) {
    const d = this.docs.get(id);
    d.states = [state];
    d.ackedAt = where; // when and through which proxy incarnation, for failure messages
  }

  unknown(id, after) {
    const d = this.docs.get(id);
    d.states = [d.states[0], after];
    d.settled = false;
  }

  /** null when `doc` (or null for absent) is an allowed state of `id`; else a description. */
  check(id, doc) {
    const d = this.docs.get(id);
    const allowed = d.states.some((s) =>
      s === null ? doc === null : doc !== null && doc.n === s.n && doc.date.getTime() === d.date.getTime(),
    );
    if (allowed) return null;
    return `_id ${id}: got ${show(doc)}, allowed ${show(d.states)} (date ${d.date.toISOString()}; last acknowledged ${show(d.ackedAt)})`;
  }
}

function newDate(rng) {
  const now = Date.now();
  return rng.chance(0.5) ? new Date(now - rng.int(10 * H, 100 * H)) : new Date(now - rng.int(0, H));
}

test('kill -9 of the worker leader, the standby proxy, the fast store and the archive, and feeder pauses, lose no acknowledged write', { timeout: 120_000 + ROUNDS * 60_000 }, async () => {
  const rng = makeRng(SEED);
  t = await startTiered({
    collections: [NS],
    horizon: HORIZON,
    guard: '500ms',
    causalWaitTimeout: '10s',
    workers: {
      lease: `${LEASE_MS}ms`,
      feeder: { mode: FEEDER_MODE, lazyDelay: '1m' },
      evictor: { interval: '100ms' },
      warmer: { interval: '200ms' },
    },
  });
  await t.waitHealthy();
  proxyB = new ProxyServer({
    bin: t.bin,
    configPath: path.join(t.dir, 'proxy-b.yaml'),
    configFor: (port) => t.configFor(port),
    env: t.env,
    readyTimeoutMs: t.readyTimeoutMs,
    name: 'halocline proxy B',
  });
  await proxyB.start(0);
  const proxies = [t.proxy, proxyB];
  // Both proxies, as a driver lists mongos routers: a killed one's operations go to the other.
  const routersUri = `mongodb://${proxies.map((p) => `127.0.0.1:${p.port}`).join(',')}/`;
  const crashed = () => {
    const e = t.crashError();
    if (e) return e;
    const p = proxyB.proc;
    return p && p.crashed ? new Error(`proxy B exited on its own (${show(p.exitInfo)})\n${p.tail()}`) : null;
  };

  const clientOptions = { serverSelectionTimeoutMS: 15_000, socketTimeoutMS: 30_000, retryWrites: true, retryReads: true };
  const stats = { ops: 0, acked: 0, unknown: 0, reads: 0, readErrors: 0, errors: {} };
  const violations = [];
  const books = [];
  let stop = false;

  const t0 = Date.now();
  // Where an event happened: ms since the start, and which proxy incarnation was running.
  const here = () => ({ ms: Date.now() - t0, proxy: t.proxy.starts });
  const noteError = (e, kind) => {
    const k = e.code !== undefined ? `${e.codeName || e.name}(${e.code})` : e.name;
    stats.errors[k] = (stats.errors[k] || 0) + 1;
    // One sample per error kind, so the summary says which operation got what.
    stats.samples = stats.samples || {};
    if (!stats.samples[k]) stats.samples[k] = `${kind}: ${String(e.message).slice(0, 300)}`;
  };

  const writer = async (w) => {
    // Even writers retry (a retry must be applied once: the proxy keeps lsid/txnNumber);
    // odd writers do not, so failed writes really leave unknown outcomes behind.
    const c = await t.track(new MongoClient(routersUri, { ...clientOptions, retryWrites: w % 2 === 0, monitorCommands: true }));
    const coll = c.db('shop').collection('orders');
    // What the driver sent for the current operation (a retry shows as a second start).
    const attempts = [];
    c.on('commandStarted', (e) => {
      if (['insert', 'update', 'delete'].includes(e.commandName)) {
        attempts.push({ sent: e.commandName, txnNumber: e.command.txnNumber === undefined ? null : String(e.command.txnNumber) });
      }
    });
    c.on('commandFailed', (e) => attempts.push({ failed: e.commandName, error: String(e.failure && e.failure.message).slice(0, 200) }));
    const sent = () => show(attempts);
    const wr = makeRng(SEED + 1 + w);
    const book = new Book();
    books.push({ w, book });
    let seq = 0;
    while (!stop) {
      const live = book.liveIds();
      const kind = live.length < 5 ? 'insert' : wr.weighted([
        [35, 'insert'],
        [25, 'inc'],
        [10, 'replace'],
        [10, 'delete'],
        [15, 'readId'],
        [5, 'readAll'],
      ]);
      attempts.length = 0;
      stats.ops++;
      try {
        if (kind === 'insert') {
          const id = w * 1_000_000 + seq++;
          const date = newDate(wr);
          book.docs.set(id, { date, states: [null], settled: true });
          try {
            await coll.insertOne({ _id: id, w, date, n: 0, pad: 'x'.repeat(64) });
          } catch (e) {
            if (e.code === 11000) violations.push(`insert of fresh _id ${id} answered duplicate key: a retry was applied twice (${e.message}); driver: ${sent()}`);
            book.unknown(id, { n: 0 });
            throw e;
          }
          book.acked(id, { n: 0 }, here());
        } else if (kind === 'inc') {
          const id = wr.pick(live);
          const n = book.docs.get(id).states[0].n;
          let r;
          try {
            r = await coll.updateOne({ _id: id }, { $inc: { n: 1 } });
          } catch (e) {
            book.unknown(id, { n: n + 1 });
            throw e;
          }
          if (r.matchedCount !== 1 || r.modifiedCount !== 1) {
            violations.push(`$inc of live _id ${id} (n=${n}) matched ${r.matchedCount}, modified ${r.modifiedCount}; driver: ${sent()}`);
          }
          book.acked(id, { n: n + 1 }, here());
        } else if (kind === 'replace') {
          // A whole new body (same date, so the document keeps its tier placement rules).
          const id = wr.pick(live);
          const d = book.docs.get(id);
          const n = d.states[0].n;
          let r;
          try {
            r = await coll.replaceOne({ _id: id }, { w, date: d.date, n: n + 1, pad: 'r'.repeat(wr.int(1, 96)) });
          } catch (e) {
            book.unknown(id, { n: n + 1 });
            throw e;
          }
          if (r.matchedCount !== 1 || r.modifiedCount !== 1) {
            violations.push(`replace of live _id ${id} (n=${n}) matched ${r.matchedCount}, modified ${r.modifiedCount}; driver: ${sent()}`);
          }
          book.acked(id, { n: n + 1 }, here());
        } else if (kind === 'delete') {
          const id = wr.pick(live);
          let r;
          try {
            r = await coll.deleteOne({ _id: id });
          } catch (e) {
            book.unknown(id, null);
            throw e;
          }
          if (r.deletedCount !== 1) violations.push(`delete of live _id ${id} deleted ${r.deletedCount} at ${show(here())}; driver: ${sent()}; last acknowledged ${show(book.docs.get(id).ackedAt)}`);
          book.acked(id, null, here());
        } else if (kind === 'readId') {
          const ids = [...book.docs.keys()].filter((id) => book.docs.get(id).settled);
          if (!ids.length) continue;
          const id = wr.pick(ids);
          stats.reads++;
          const doc = await coll.findOne({ _id: id });
          const bad = book.check(id, doc);
          if (bad) violations.push(`find by _id through the proxy at ${show(here())}: ${bad}`);
        } else {
          // No date bound and no _id: routed to the archive after a feeder wait.
          stats.reads++;
          const readFrom = here();
          const docs = await coll.find({ w, n: { $gte: 0 } }).toArray();
          const readAt = { from: readFrom, to: here() };
          const got = new Map(docs.map((d) => [d._id, d]));
          for (const [id] of book.docs) {
            const bad = book.check(id, got.get(id) ?? null);
            if (bad) violations.push(`archive-routed find({w: ${w}}) through the proxy at ${show(readAt)}: ${bad}`);
          }
          for (const id of got.keys()) if (!book.docs.has(id)) violations.push(`find({w: ${w}}) returned unknown _id ${id}`);
        }
        if (kind !== 'readId' && kind !== 'readAll') stats.acked++;
      } catch (e) {
        if (kind === 'readId' || kind === 'readAll') stats.readErrors++;
        else stats.unknown++;
        noteError(e, kind);
        if (!isNetworkError(e) && e.code === undefined) throw e; // a bug in this test, not an outcome
        // Pace retries while a component is down (not a synchronisation point).
        await new Promise((r) => setTimeout(r, 25));
      }
    }
  };

  const writers = Array.from({ length: WRITERS }, (_, w) => writer(w));
  const writersDone = Promise.all(writers);
  // Surface a writer's crash immediately instead of after the schedule.
  let writerCrash = null;
  writersDone.catch((e) => {
    writerCrash = e;
  });

  const victims = [];
  for (let k = 0; k < ROUNDS; k++) {
    const round = ['leader', 'standby', 'fast', 'archive', 'feeder'];
    for (let i = round.length - 1; i > 0; i--) {
      const j = rng.int(0, i);
      [round[i], round[j]] = [round[j], round[i]];
    }
    victims.push(...round);
  }
  const schedule = [];
  const takeovers = []; // ms from kill -9 of the leader to a proxy reporting 'leader'
  try {
    for (const victim of victims) {
      // Let the load run for a random number of acknowledged writes, then crash.
      const target = stats.acked + rng.int(20, 80);
      await waitUntil(`${target} acknowledged writes before killing the ${victim} (${replay()})`, () => stats.acked >= target, {
        abortIf: () => writerCrash || crashed(),
        timeoutMs: 90_000,
        detail: () => `stats ${show(stats)}; schedule so far ${show(schedule)}`,
      });
      schedule.push({ victim, afterAcked: stats.acked, ...here() });
      if (victim === 'leader' || victim === 'standby') {
        // The proxy in that role now (during a takeover neither may be the leader: then either).
        const roles = await Promise.all(proxies.map(roleOf));
        let i = roles.indexOf(victim);
        if (i < 0) i = rng.int(0, 1);
        schedule[schedule.length - 1].killed = `${i === 0 ? 'A' : 'B'} (${roles[i]})`;
        const killedAt = Date.now();
        await proxies[i].kill();
        await proxies[i].restart({ samePort: true });
        if (roles[i] === 'leader') {
          // Takeover: the lease expires (at most LEASE after its last renewal) and a proxy,
          // the standby or the restarted one, takes it within a third of LEASE more.
          await waitUntil(`a proxy to take the worker lease over (${replay()})`, async () => (await Promise.all(proxies.map(roleOf))).includes('leader'), {
            abortIf: () => writerCrash || crashed(),
            timeoutMs: 60_000,
          });
          takeovers.push(Date.now() - killedAt);
          schedule[schedule.length - 1].takeoverMs = takeovers[takeovers.length - 1];
        }
      } else if (victim === 'feeder') {
        // No crash: an operator's pause of 1-4 s, which the load must not notice.
        const ms = rng.int(1000, 4000);
        schedule[schedule.length - 1].pauseMs = ms;
        await (await t.adminClient()).db('admin').command({ haloclinePauseFeeder: ms });
      } else if (victim === 'fast') {
        await t.killFast();
        await t.restartFast();
      } else {
        await t.killArchive();
        await t.restartArchive();
      }
      schedule[schedule.length - 1].backMs = here().ms;
      // Recovery: the load makes progress again.
      const resumed = stats.acked + 3 * WRITERS;
      await waitUntil(`writes to be acknowledged again after restarting the ${victim} (${replay()})`, () => stats.acked >= resumed, {
        abortIf: () => writerCrash || crashed(),
        timeoutMs: 90_000,
        detail: () => `stats ${show(stats)}; schedule ${show(schedule)}\n${t.proxy.proc.tail(30)}`,
      });
    }
  } finally {
    stop = true;
    await writersDone.catch(() => {});
  }
  if (writerCrash) throw writerCrash;

  // Recovery complete: proxy B stopped cleanly (proxy A takes the workers over if B held
  // them), everything up, no pause left, the feeder caught up with a write made after all others.
  await proxyB.stop();
  await t.waitHealthy({ timeoutMs: 60_000 });
  await (await t.adminClient()).db('admin').command({ haloclinePauseFeeder: 0 });
  const status = await t.waitFeederCaughtUp({ timeoutMs: 90_000 });

  const archive = new Map((await t.tierDocs('archive', NS)).map((d) => [d._id, d]));
  const fast = await t.tierDocs('fast', NS);
  const proxyClient = await t.client();
  const proxyColl = proxyClient.db('shop').collection('orders');
  let certain = 0;
  let uncertain = 0;
  for (const { w, book } of books) {
    const viaProxy = new Map((await proxyColl.find({ w, n: { $gte: 0 } }).toArray()).map((d) => [d._id, d]));
    for (const [id, d] of book.docs) {
      if (d.settled) certain++;
      else uncertain++;
      const a = book.check(id, archive.get(id) ?? null);
      if (a) violations.push(`archive after recovery: ${a}`);
      const p = book.check(id, viaProxy.get(id) ?? null);
      if (p) violations.push(`archive-routed find through the proxy after recovery: ${p}`);
      // Whatever an unknown outcome did, the proxy must answer what the archive now holds.
      const one = await proxyColl.findOne({ _id: id });
      if (show(one) !== show(archive.get(id) ?? null)) {
        violations.push(`find by _id ${id} through the proxy: ${show(one)}, archive holds ${show(archive.get(id) ?? null)}`);
      }
    }
    for (const id of viaProxy.keys()) if (!book.docs.has(id)) violations.push(`proxy returned unknown _id ${id}`);
  }
  for (const id of archive.keys()) {
    if (!books.some(({ book }) => book.docs.has(id))) violations.push(`archive holds unknown _id ${show(id)}`);
  }
  for (const d of fast) {
    if (show(d) !== show(archive.get(d._id) ?? null)) {
      violations.push(`fast tier holds ${show(d)} but the archive holds ${show(archive.get(d._id) ?? null)} after catch-up`);
    }
  }
  const tomb = await t.tombstones(NS);
  if (tomb.length) violations.push(`tombstones left after catch-up: ${show(tomb.slice(0, 5))}`);

  const summary =
    `${replay()}; kills ${show(schedule)}; ${certain} documents with acknowledged state, ${uncertain} with an unknown outcome; ` +
    `stats ${show(stats)}; final status ${show(status.raw)}`;
  const kills = schedule.filter((s) => s.victim !== 'feeder').length;
  process.stdout.write(
    `# fault history: ${stats.ops} operations, ${stats.acked} writes acknowledged, ${stats.unknown} writes failed (unknown outcome), ` +
      `${stats.reads} reads (${stats.readErrors} failed), ${kills} kills, ${schedule.length - kills} feeder pauses; ` +
      `${takeovers.length} leader takeovers (lease ${LEASE_MS} ms), in ${takeovers.length ? `${Math.min(...takeovers)}-${Math.max(...takeovers)}` : '-'} ms; ` +
      `checker: ${violations.length ? `${violations.length} violations` : 'every acknowledged write present in its latest version, no delete undone, reads saw their writes, the archive converged'}\n`,
  );
  assert.deepEqual(violations.slice(0, 25), [], `${violations.length} violations; ${summary}`);
  assert.ok(certain > 100, `too little acknowledged work to mean anything: ${summary}`);
  // Within the lease, one renewal period and the restart and polling around them.
  for (const ms of takeovers) assert.ok(ms <= LEASE_MS * 2 + 10_000, `a takeover took ${ms} ms with a ${LEASE_MS} ms lease: ${summary}`);
  process.stdout.write(`# fault: ${summary.slice(0, 2000)}\n`);
});
