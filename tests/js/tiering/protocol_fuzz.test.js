'use strict';
// A protocol fuzzer for the proxy: random sequences of valid and mutated commands sent
// through real connections, on tiered and untiered collections, while the workers run.
// The proxy must answer every well-framed message (a reply, ok or not: never silence),
// may close a connection only after a frame whose bytes were damaged, and must never
// crash, hang or leak a sanitizer report (the harness checks at cleanup). At the end it
// still serves a driver, and both tiers are reachable. Replay a failure with
// HALO_SEED=<seed printed in the message>.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const W = require('../lib/wire');
const { startTiered, makeRng, chooseSeed, show } = require('../lib/tiered');

const SEED = chooseSeed();
const STEPS = 1500;
const replay = () => `seed ${SEED} (replay: HALO_SEED=${SEED} node --test tiering/protocol_fuzz.test.js)`;
let t;

before(async () => {
  t = await startTiered({ collections: ['shop.orders'], horizon: '5s', guard: '1s', startProxy: false });
  const archive = await t.tierClient('archive');
  const now = Date.now();
  await archive.db('shop').collection('orders').insertMany(
    Array.from({ length: 60 }, (_, i) => ({ _id: i, date: new Date(now - i * 1000), cat: i % 4, v: i })),
  );
  await t.startProxy();
  await t.waitHealthy();
});

after(async () => {
  if (t) await t.cleanup();
});

/** A random BSON-able value, sometimes of a surprising type or size. */
function value(rng, depth = 0) {
  switch (rng.int(0, 11)) {
    case 0: return rng.int(-5, 5);
    case 1: return rng.pick(['', 'x', '$x', 'a.b', 'shop', '\u0000', 'é'.repeat(rng.int(1, 40))]);
    case 2: return rng.chance(0.5);
    case 3: return null;
    case 4: return new Date(Date.now() - rng.int(0, 20_000));
    case 5: return new W.BSON.ObjectId();
    case 6: return W.BSON.Long.fromNumber(rng.int(-1e9, 1e9));
    case 7: return rng() * 1e6;
    case 8: return depth > 3 ? 1 : Array.from({ length: rng.int(0, 3) }, () => value(rng, depth + 1));
    case 9: return depth > 3 ? {} : doc(rng, depth + 1);
    case 10: return { [rng.pick(['$gt', '$in', '$bogus', '$exists', '$regex', '$elemMatch', '$not'])]: value(rng, depth + 1) };
    default: return rng.pick([-1, 0, 1, 2 ** 31, -(2 ** 31), Number.NaN]);
  }
}

function doc(rng, depth = 0) {
  const d = {};
  const keys = ['_id', 'date', 'cat', 'v', 'a', 'a.b', '$set', '$inc', '$or', '$and', '$expr'];
  for (let i = rng.int(0, 3); i > 0; i--) d[rng.pick(keys)] = value(rng, depth + 1);
  return d;
}

/** A plausible command on a tiered or untiered collection, or an admin command. */
function command(rng, cursors) {
  const coll = rng.pick(['orders', 'orders', 'plain', 'nosuch']);
  const db = rng.chance(0.9) ? 'shop' : rng.pick(['admin', 'halocline', 'local', '$bad', '']);
  const recent = { date: { $gte: new Date(Date.now() - 3000) } };
  const filter = rng.pick([{}, { _id: rng.int(0, 70) }, recent, { cat: rng.int(0, 3) }, doc(rng)]);
  const pick = rng.int(0, 17);
  const c = (() => {
    switch (pick) {
      case 0: return { find: coll, filter, limit: rng.int(0, 20), sort: rng.chance(0.5) ? { v: rng.pick([1, -1]) } : undefined, batchSize: rng.int(0, 5) };
      case 1: return { insert: coll, documents: [{ _id: rng.int(0, 200), date: new Date(), cat: rng.int(0, 3), v: value(rng) }] };
      case 2: return { update: coll, updates: [{ q: filter, u: rng.chance(0.7) ? { $set: { v: value(rng) } } : doc(rng), upsert: rng.chance(0.2), multi: rng.chance(0.3) }] };
      case 3: return { delete: coll, deletes: [{ q: filter, limit: rng.pick([0, 1]) }] };
      case 4: return { findAndModify: coll, query: filter, update: { $inc: { v: 1 } }, new: rng.chance(0.5), upsert: rng.chance(0.1) };
      case 5: return { aggregate: coll, pipeline: [{ $match: filter }, rng.pick([{ $limit: 3 }, { $group: { _id: '$cat', n: { $sum: 1 } } }, { $project: doc(rng) }, { $bogus: 1 }])], cursor: {} };
      case 6: return { count: coll, query: filter };
      case 7: return { distinct: coll, key: rng.pick(['cat', 'v', '', '$x']), query: filter };
      case 8: return { getMore: cursors.length && rng.chance(0.7) ? rng.pick(cursors) : W.BSON.Long.fromNumber(rng.int(1, 1e9)), collection: coll, batchSize: rng.int(0, 3) };
      case 9: return { killCursors: coll, cursors: cursors.length ? [rng.pick(cursors)] : [W.BSON.Long.fromNumber(7)] };
      case 10: return { explain: { find: coll, filter }, verbosity: rng.pick(['queryPlanner', 'executionStats', 'bogus']) };
      case 11: return { haloclineStatus: 1 };
      case 12: return { listCollections: 1, filter: rng.chance(0.5) ? {} : doc(rng) };
      case 13: return { createIndexes: coll, indexes: [{ key: rng.pick([{ cat: 1 }, { v: -1 }, {}, { a: 'text' }]), name: rng.pick(['cat_1', 'v_-1', '', 'x']) }] };
      case 14: return { hello: 1, saslSupportedMechs: rng.pick(['admin.x', 5]) };
      case 15: return { [rng.pick(['bogusCommand', 'replSetStepDown', 'shutdown_not', 'eval'])]: 1 };
      case 16: return { ping: 1 };
      default: return { startSession: 1 };
    }
  })();
  c.$db = db;
  // Mutations of a valid command: a dropped, retyped or extra field.
  const m = rng.int(0, 9);
  const keys = Object.keys(c).filter((k) => k !== '$db');
  if (m === 0 && keys.length > 1) delete c[rng.pick(keys.slice(1))];
  if (m === 1) c[rng.pick(keys)] = value(rng);
  if (m === 2) c[rng.pick(['comment', 'maxTimeMS', 'lsid', 'txnNumber', 'readConcern', 'writeConcern', 'bogusField', '$clusterTime'])] = value(rng);
  for (const k of Object.keys(c)) if (c[k] === undefined) delete c[k];
  return c;
}

/** Damages the body of a frame: never the header or the flag bits (a moreToCome bit
 * would rightly mean "no reply"; a bad length is the wire test's job). */
function damage(rng, frame) {
  const f = Buffer.from(frame);
  for (let i = rng.int(1, 4); i > 0; i--) f[rng.int(20, f.length - 1)] = rng.int(0, 255);
  return f;
}

test(`${STEPS} random and mutated commands: every one answered, the proxy intact`, { timeout: 600_000 }, async () => {
  const rng = makeRng(SEED);
  const conns = [];
  for (let i = 0; i < 4; i++) conns.push(await W.RawConnection.connect(t.proxy.port));
  const cursors = [];
  const counts = { replies: 0, ok: 0, errors: 0, damaged: 0, closedAfterDamage: 0 };
  const history = [];
  for (let step = 0; step < STEPS; step++) {
    const slot = rng.int(0, conns.length - 1);
    const c = conns[slot];
    const cmd = command(rng, cursors);
    let frame;
    try {
      frame = W.opMsg(cmd);
    } catch (e) {
      continue; // not serialisable (e.g. a key the BSON library refuses)
    }
    const damaged = rng.chance(0.08);
    if (damaged) {
      frame = damage(rng, frame);
      counts.damaged++;
    }
    history.push(damaged ? `(damaged) ${show(cmd)}` : show(cmd));
    if (history.length > 8) history.shift();
    await c.send(frame);
    let r;
    try {
      r = await c.next(30_000);
    } catch (e) {
      assert.fail(`no reply and no close within 30 s; ${replay()}\nlast commands:\n${history.join('\n')}`);
    }
    if (r.closed) {
      assert.ok(damaged, `the proxy closed the connection after a well-framed command; ${replay()}\nlast commands:\n${history.join('\n')}`);
      counts.closedAfterDamage++;
      conns[slot] = await W.RawConnection.connect(t.proxy.port);
      continue;
    }
    counts.replies++;
    if (r.parseError && process.env.HALO_FUZZ_DUMP) console.log('REQ', frame.toString('hex'), 'REPLYERR', String(r.parseError));
    assert.ok(!r.parseError, `a reply that does not parse (${r.parseError}); ${replay()}\nlast commands:\n${history.join("\n")}`);
    if (!damaged) assert.equal(r.responseTo, frame.readInt32LE(4), `reply to another request; ${replay()}`);
    const d = r.doc || {};
    if (d.ok === 1) counts.ok++;
    else counts.errors++;
    if (!damaged && d.ok !== 1) {
      assert.equal(typeof d.code, 'number', `an error without a code: ${show(d)}; ${replay()}\nlast commands:\n${history.join('\n')}`);
      assert.equal(typeof d.errmsg, 'string', `an error without a message: ${show(d)}; ${replay()}`);
    }
    const id = d.cursor && d.cursor.id;
    if (id && !(typeof id === 'number' && id === 0) && !(id.isZero && id.isZero())) cursors.push(id);
    if (cursors.length > 20) cursors.shift();
  }
  for (const c of conns) c.destroy();
  process.stdout.write(`# protocol fuzz: ${replay()}; ${show(counts)}\n`);
  // Still whole: a driver works and both tiers are reachable.
  const client = await t.client();
  assert.equal((await client.db('admin').command({ ping: 1 })).ok, 1);
  const s = await t.status();
  assert.ok(s.reachable.fast && s.reachable.archive, show(s.raw));
  assert.ok(counts.replies > STEPS / 2, show(counts));
});
