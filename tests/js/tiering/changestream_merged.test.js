'use strict';
// Database and cluster change streams that cover a tiered collection (docs/CONSISTENCY.md,
// Change streams): the proxy merges the fast tier's stream of the tiered collections with
// the archive's stream of every other collection, under one resume token. A seeded workload
// writes to the tiered shop.orders and to the untiered shop.notes and other.things, through
// the proxy and against a plain store, while the evictor and the warmer move documents
// (a 2-second horizon); the proxy is killed (-9) and restarted half way and the driver
// resumes both streams from their merged tokens. For every collection, the proxy's streams
// must show the same events in the same order as the plain store's: no worker's or feeder's
// write, none of the proxy's metadata, none missing, none twice. (The order across
// collections that live in different tiers is by wall time within a batch: two replica sets
// have no common cluster time.)

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { MongoClient, Long } = require('mongodb');
const { startStore } = require('../lib/server');
const { startTiered, makeRng, chooseSeed, waitUntil, show, cleanupAll, collectEvents } = require('../lib/tiered');
const { expectServerError } = require('../lib/fixture');

const SEED = chooseSeed();
const OPS = Number(process.env.HALO_STREAM_OPS || 240);
const HORIZON_MS = 2000;
const NAMESPACES = ['shop.orders', 'shop.notes', 'other.things'];
let t;
let ref;
let refClient;

before(async () => {
  t = await startTiered({
    collections: [{ namespace: 'shop.orders', changeStreams: true }],
    horizon: HORIZON_MS,
    guard: '500ms',
    startProxy: false,
    workers: { evictor: { interval: '100ms' }, warmer: { interval: '200ms', batchSize: 20 } },
  });
  ref = await startStore({ replSet: 'rs0' });
  refClient = new MongoClient(ref.uri(), { serverSelectionTimeoutMS: 10_000 });
  await refClient.connect();
  // The same opening data on both sides: old orders, and recent ones the warmer copies up;
  // the untiered collections exist before the streams open.
  const now = Date.now();
  const docs = [];
  for (let i = 0; i < 80; i++) docs.push({ _id: i, date: new Date(now - (i % 2 ? 400 * 86_400_000 : 1000)), v: i });
  const archive = await t.tierClient('archive');
  for (const c of [archive, refClient]) {
    await c.db('shop').collection('orders').insertMany(docs);
    await c.db('shop').collection('notes').insertOne({ _id: 'first', v: 0 });
    await c.db('other').collection('things').insertOne({ _id: 'first', v: 0 });
  }
  await t.startProxy();
  await t.waitHealthy();
});

after(() => cleanupAll([refClient], [t, ref]));


/** The events of each namespace, in their order. */
function byNamespace(events) {
  const out = {};
  for (const ns of NAMESPACES) out[ns] = [];
  for (const e of events) (out[e.ns] || (out[e.ns] = [])).push(e);
  return out;
}

function sameEvents(got, want, what) {
  const g = byNamespace(got);
  const w = byNamespace(want);
  assert.deepEqual(Object.keys(g).sort(), Object.keys(w).sort(), `${what}: events of other namespaces (seed ${SEED}): ${show(Object.keys(g))}`);
  for (const ns of Object.keys(w)) {
    assert.equal(g[ns].length, w[ns].length, `${what}: ${g[ns].length} events on ${ns}, the plain store has ${w[ns].length} (seed ${SEED})`);
    for (let i = 0; i < w[ns].length; i++)
      assert.deepEqual(g[ns][i], w[ns][i], `${what}: event #${i} on ${ns} differs (seed ${SEED}; replay: HALO_SEED=${SEED})\nproxy: ${show(g[ns].slice(Math.max(0, i - 3), i + 3))}\nplain: ${show(w[ns].slice(Math.max(0, i - 3), i + 3))}`);
  }
}

test('database and cluster streams through the proxy show exactly the application writes of every collection, across kill -9 of the proxy', { timeout: 300_000 }, async () => {
  const rng = makeRng(SEED);
  const client = await t.client({ retryWrites: true });
  const startStatus = (await t.status()).coll('shop.orders');
  const opts = { maxAwaitTimeMS: 300 };
  const streams = [client.db('shop').watch([], opts), client.watch([], opts)];
  const refStreams = [refClient.db('shop').watch([], opts), refClient.watch([], opts)];
  // A change stream starts when its first batch is answered.
  await Promise.all([...streams, ...refStreams].map((s) => s.tryNext()));
  const got = [[], []];
  const want = [[], []];
  let expected = [0, 0];
  let nextId = 1000;
  const live = { 'shop.orders': new Set(Array.from({ length: 80 }, (_, i) => i)), 'shop.notes': new Set(['first']), 'other.things': new Set(['first']) };
  const pickLive = (ns) => [...live[ns]][rng.int(0, live[ns].size - 1)];
  for (let i = 0; i < OPS; i++) {
    if (i === Math.floor(OPS / 2)) {
      // Half way: read what is there so far, then kill the proxy; the driver resumes both
      // streams with their last merged tokens once the proxy is back.
      await Promise.all(streams.map((s, k) => collectEvents(s, got[k], expected[k])));
      await t.killProxy();
      await t.restartProxy();
      await waitUntil('the evictor to remove documents while the streams are open', async () =>
        (await t.status()).coll('shop.orders').evicted - startStatus.evicted >= 5, { timeoutMs: 60_000 });
    }
    const ns = NAMESPACES[rng.int(0, 2) === 0 ? rng.int(1, 2) : 0];
    const [dbName, collName] = ns.split('.');
    const r = rng.int(0, 9);
    const date = new Date(Date.now() - (rng.chance(0.5) ? 400 * 86_400_000 : 0));
    let op;
    if (r < 3 || live[ns].size < 5) {
      const doc = { _id: nextId++, date, v: rng.int(0, 999) };
      op = (c) => c.insertOne(doc);
      live[ns].add(doc._id);
    } else if (r < 6) {
      const id = pickLive(ns);
      const set = { v: rng.int(0, 999), [`f${rng.int(0, 3)}`]: i };
      op = (c) => c.updateOne({ _id: id }, { $set: set });
    } else if (r < 7) {
      const id = pickLive(ns);
      const doc = { date, w: i };
      op = (c) => c.replaceOne({ _id: id }, doc);
    } else if (r < 8) {
      const id = pickLive(ns);
      op = (c) => c.findOneAndUpdate({ _id: id }, { $inc: { v: 1 }, $unset: { f0: '' } });
    } else {
      const id = pickLive(ns);
      live[ns].delete(id);
      op = (c) => c.deleteOne({ _id: id });
    }
    await op(client.db(dbName).collection(collName));
    await op(refClient.db(dbName).collection(collName));
    expected = expected.map((n, k) => n + (k === 0 && dbName !== 'shop' ? 0 : 1));
  }
  await Promise.all(streams.map((s, k) => collectEvents(s, got[k], expected[k])));
  await Promise.all(refStreams.map((s, k) => collectEvents(s, want[k], expected[k])));
  for (const s of streams) assert.equal(await s.tryNext(), null, 'an event trails the application writes');
  for (const s of [...streams, ...refStreams]) await s.close();
  sameEvents(got[0], want[0], 'database stream');
  sameEvents(got[1], want[1], 'cluster stream');
  const status = (await t.status()).coll('shop.orders');
  const evicted = status.evicted - startStatus.evicted;
  const promoted = status.raw.routing.promoted - startStatus.raw.routing.promoted;
  assert.ok(evicted > 0, `the evictor evicted nothing while the streams ran: ${show(status.raw)}`);
  assert.ok(promoted > 0, `nothing was copied up while the streams ran: ${show(status.raw)}`);
  process.stdout.write(`# changestream_merged: seed ${SEED}; ${expected[1]} events; evicted ${evicted}, copied up ${promoted} meanwhile\n`);
});

test('a merged stream resumes through another connection from any event\'s token, with updateLookup through the routing', { timeout: 120_000 }, async () => {
  const client = await t.client();
  const shop = client.db('shop');
  const stream = shop.watch([], { fullDocument: 'updateLookup', maxAwaitTimeMS: 300 });
  await stream.tryNext();
  await shop.collection('orders').insertOne({ _id: 'r1', date: new Date() });
  await shop.collection('notes').insertOne({ _id: 'r2' });
  await shop.collection('orders').updateOne({ _id: 'r1' }, { $set: { v: 1 } });
  await shop.collection('notes').updateOne({ _id: 'r2' }, { $set: { v: 2 } });
  const events = [];
  while (events.length < 4) events.push(await stream.next());
  await stream.close();
  const key = (e) => `${e.operationType} ${e.ns.coll} ${e.documentKey._id}`;
  const perNs = (list, coll) => list.filter((e) => e.ns.coll === coll).map(key);
  assert.deepEqual(perNs(events, 'orders'), ['insert orders r1', 'update orders r1']);
  assert.deepEqual(perNs(events, 'notes'), ['insert notes r2', 'update notes r2']);
  for (const e of events.filter((x) => x.operationType === 'update')) assert.equal(e.fullDocument.v, e.ns.coll === 'orders' ? 1 : 2, show(e));
  // From each event's token, a new stream (another connection) shows exactly the events after it.
  const other = await t.client();
  for (let i = 0; i < events.length; i++) {
    const s = other.db('shop').watch([], { resumeAfter: events[i]._id, maxAwaitTimeMS: 300 });
    const rest = [];
    while (rest.length < events.length - 1 - i) rest.push(await s.next());
    assert.equal(await s.tryNext(), null, `resuming after event #${i} shows more than the events after it`);
    await s.close();
    for (const coll of ['orders', 'notes'])
      assert.deepEqual(perNs(rest, coll), perNs(events.slice(i + 1), coll), `resuming after event #${i}`);
  }
});

test('a merged stream refuses a token that is not its own (260)', async () => {
  const client = await t.client();
  // A collection stream's token (the fast tier's own format) is not a merged one.
  const orders = client.db('shop').collection('orders');
  const cs = orders.watch([], { maxAwaitTimeMS: 300 });
  await cs.tryNext();
  await orders.insertOne({ _id: 'tok', date: new Date() });
  const ev = await cs.next();
  await cs.close();
  await expectServerError(async () => {
    const s = client.db('shop').watch([], { resumeAfter: ev._id });
    try {
      await s.tryNext();
    } finally {
      await s.close();
    }
  }, 260);
});

test('while the fast store is down, a getMore on a merged or a collection stream fails resumable, and the streams resume once it is back', { timeout: 120_000 }, async () => {
  const client = await t.client();
  const shop = client.db('shop');
  // Raw commands in one session (a cursor's getMore must come in the session that opened it).
  const session = client.startSession();
  const merged = await shop.command({ aggregate: 1, pipeline: [{ $changeStream: {} }], cursor: {} }, { session });
  const single = await shop.command({ aggregate: 'orders', pipeline: [{ $changeStream: {} }], cursor: {} }, { session });
  const streams = [shop.watch([], { maxAwaitTimeMS: 300 }), shop.collection('orders').watch([], { maxAwaitTimeMS: 300 })];
  await Promise.all(streams.map((s) => s.tryNext()));
  await t.killFast();
  try {
    for (const reply of [merged, single]) {
      const coll = reply.cursor.ns.slice(reply.cursor.ns.indexOf('.') + 1);
      const e = await shop.command({ getMore: Long.fromValue(reply.cursor.id), collection: coll, maxTimeMS: 300 }, { session }).then(
        (r) => assert.fail(`a getMore succeeded while the fast tier was down: ${show(r)}`),
        (err) => err,
      );
      assert.ok((e.errorLabels || []).includes('ResumableChangeStreamError'), `a getMore ${reply === merged ? 'on the merged stream' : 'on the collection stream'} while the fast tier is down carries no ResumableChangeStreamError: ${show(e)}`);
    }
  } finally {
    await t.restartFast();
  }
  await session.endSession();
  await shop.collection('orders').insertOne({ _id: 'after-restart', date: new Date() });
  for (const s of streams) {
    const ev = await s.next();
    assert.deepEqual([ev.operationType, ev.documentKey._id], ['insert', 'after-restart']);
    await s.close();
  }
});
