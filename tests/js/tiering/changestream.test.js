'use strict';
// Change streams on a tiered collection (docs/CONSISTENCY.md, Change streams): with
// `changeStreams: true` the proxy serves the fast tier's stream without the protocol's own
// writes (promotions, warm-up copies, evictions). A seeded workload of single-document
// inserts, updates, replaces, findOneAndUpdates and deletes runs through the proxy and
// against a plain store, while the evictor and the warmer move documents between the tiers
// (a 2-second horizon; half way the test waits until the evictor has removed copies); the
// proxy is killed (-9) and restarted half way, the fast store three quarters of the way,
// and the driver resumes its stream each time. Both streams must show the same events in the same order:
// none of the workers', none missing, none twice.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { MongoClient, Timestamp } = require('mongodb');
const { startStore } = require('../lib/server');
const { startTiered, makeRng, chooseSeed, waitUntil, show, cleanupAll, collectEvents } = require('../lib/tiered');
const { expectServerError } = require('../lib/fixture');

const SEED = chooseSeed();
const OPS = Number(process.env.HALO_STREAM_OPS || 240);
const HORIZON_MS = 2000;
let t;
let ref;
let refClient;

before(async () => {
  t = await startTiered({
    collections: [{ namespace: 'shop.orders', changeStreams: true }, 'shop.plain'],
    horizon: HORIZON_MS,
    guard: '500ms',
    startProxy: false,
    workers: { evictor: { interval: '100ms' }, warmer: { interval: '200ms', batchSize: 20 } },
  });
  ref = await startStore({ replSet: 'rs0' });
  refClient = new MongoClient(ref.uri(), { serverSelectionTimeoutMS: 10_000 });
  await refClient.connect();
  // The same opening data on both sides: old documents, and recent ones the warmer copies up.
  const now = Date.now();
  const docs = [];
  for (let i = 0; i < 120; i++) docs.push({ _id: i, date: new Date(now - (i % 2 ? 400 * 86_400_000 : 1000)), v: i });
  await (await t.tierClient('archive')).db('shop').collection('orders').insertMany(docs);
  await refClient.db('shop').collection('orders').insertMany(docs);
  await t.startProxy();
  await t.waitHealthy();
});

after(() => cleanupAll([refClient], [t, ref]));


test('a stream through the proxy shows exactly the application writes, in order, across kill -9 of the proxy and of the fast store', { timeout: 300_000 }, async () => {
  const rng = makeRng(SEED);
  const client = await t.client({ retryWrites: true });
  const orders = client.db('shop').collection('orders');
  const refOrders = refClient.db('shop').collection('orders');
  const startStatus = (await t.status()).coll('shop.orders');
  const stream = orders.watch([], { maxAwaitTimeMS: 500 });
  const refStream = refOrders.watch([], { maxAwaitTimeMS: 500 });
  // A change stream starts when its first batch is answered.
  await Promise.all([stream.tryNext(), refStream.tryNext()]);
  const got = [];
  const want = [];
  let expected = 0;
  let nextId = 1000;
  const live = new Set(Array.from({ length: 120 }, (_, i) => i));
  const pickLive = () => [...live][rng.int(0, live.size - 1)];
  for (let i = 0; i < OPS; i++) {
    if (i === Math.floor((3 * OPS) / 4)) {
      // Three quarters in: the fast store itself is killed and restarted; the proxy's tier
      // connection fails, the driver resumes from its token on the restarted store's oplog.
      await collectEvents(stream, got, expected);
      await t.killFast();
      await t.restartFast();
    }
    if (i === Math.floor(OPS / 2)) {
      // Half way: read what is there so far, then kill the proxy; the driver resumes the
      // stream with its last token once the proxy is back.
      await collectEvents(stream, got, expected);
      await t.killProxy();
      await t.restartProxy();
      // And let the evictor remove copies (it leaves documents written in the last 10 s
      // alone): their deletes must not show, and the updates below copy them up again.
      await waitUntil('the evictor to remove documents while the streams are open', async () =>
        (await t.status()).coll('shop.orders').evicted - startStatus.evicted >= 5, { timeoutMs: 60_000 });
    }
    const r = rng.int(0, 9);
    const date = new Date(Date.now() - (rng.chance(0.5) ? 400 * 86_400_000 : 0));
    let op;
    if (r < 3 || live.size < 10) {
      const doc = { _id: nextId++, date, v: rng.int(0, 999) };
      op = (c) => c.insertOne(doc);
      live.add(doc._id);
    } else if (r < 6) {
      const id = pickLive();
      const set = { v: rng.int(0, 999), [`f${rng.int(0, 3)}`]: i };
      op = (c) => c.updateOne({ _id: id }, { $set: set });
    } else if (r < 7) {
      const id = pickLive();
      const doc = { date, w: i };
      op = (c) => c.replaceOne({ _id: id }, doc);
    } else if (r < 8) {
      const id = pickLive();
      op = (c) => c.findOneAndUpdate({ _id: id }, { $inc: { v: 1 }, $unset: { f0: '' } });
    } else {
      const id = pickLive();
      live.delete(id);
      op = (c) => c.deleteOne({ _id: id });
    }
    await op(orders);
    await op(refOrders);
    expected++;
  }
  await collectEvents(stream, got, expected);
  await collectEvents(refStream, want, expected);
  // Nothing more: no worker event trails the application's.
  assert.equal(await stream.tryNext(), null);
  await stream.close();
  await refStream.close();
  for (let i = 0; i < want.length; i++)
    assert.deepEqual(got[i], want[i], `event #${i} differs (seed ${SEED}; replay: HALO_SEED=${SEED})\nproxy: ${show(got.slice(Math.max(0, i - 3), i + 3))}\nplain: ${show(want.slice(Math.max(0, i - 3), i + 3))}`);
  const status = (await t.status()).coll('shop.orders');
  // The premise: the workers really moved documents while the streams ran.
  const evicted = status.evicted - startStatus.evicted;
  const promoted = status.raw.routing.promoted - startStatus.raw.routing.promoted;
  assert.ok(evicted > 0, `the evictor evicted nothing while the streams ran: ${show(status.raw)}`);
  assert.ok(promoted > 0, `nothing was copied up while the streams ran: ${show(status.raw)}`);
  process.stdout.write(`# changestream: seed ${SEED}; ${expected} events; evicted ${evicted}, copied up ${promoted} meanwhile\n`);
});

test('a stream on a tiered collection without changeStreams: true, its database or the cluster is refused (115)', async () => {
  const client = await t.client();
  const plain = client.db('shop').collection('plain');
  const e = await expectServerError(async () => {
    const s = plain.watch();
    try {
      await s.tryNext();
    } finally {
      await s.close();
    }
  }, 115);
  assert.match(e.message, /changeStreams: true/);
  for (const watch of [() => client.db('shop').watch(), () => client.watch()]) {
    await expectServerError(async () => {
      const s = watch();
      try {
        await s.tryNext();
      } finally {
        await s.close();
      }
    }, 115);
  }
});

test('updateLookup reads a document evicted since through the proxy, and a delete shows no session of the proxy', { timeout: 120_000 }, async () => {
  const client = await t.client();
  const orders = client.db('shop').collection('orders');
  const old = new Date(Date.now() - 400 * 86_400_000);
  await (await t.tierClient('archive')).db('shop').collection('orders').insertOne({ _id: 'lookup', date: old, v: 1 });
  const stream = orders.watch([], { fullDocument: 'updateLookup', maxAwaitTimeMS: 500 });
  await stream.tryNext();
  await orders.insertOne({ _id: 'gone', date: new Date() });
  await orders.updateOne({ _id: 'lookup' }, { $set: { v: 2 } }); // copies it up, then updates
  await orders.deleteOne({ _id: 'gone' });
  // Before the events are read, the evictor removes the copy (the archive has v: 2 by then):
  // the fast tier's own lookup finds nothing.
  await waitUntil('the evictor to remove the updated copy', async () => (await t.tierDocs('fast', 'shop.orders', { _id: 'lookup' })).length === 0, {
    timeoutMs: 60_000,
  });
  const events = [];
  while (events.length < 3) events.push(await stream.next());
  await stream.close();
  assert.deepEqual(events.map((e) => [e.operationType, e.documentKey._id]), [['insert', 'gone'], ['update', 'lookup'], ['delete', 'gone']]);
  assert.deepEqual(events[1].fullDocument, { _id: 'lookup', date: old, v: 2 }, show(events[1]));
  assert.equal(events[2].lsid, undefined, `a delete event carries the proxy's session: ${show(events[2])}`);
});

test('a stream starting before the fast tier\'s oldest history fails as on mongod (286), never with a silent gap', async () => {
  const client = await t.client();
  const orders = client.db('shop').collection('orders');
  await expectServerError(async () => {
    const s = orders.watch([], { startAtOperationTime: new Timestamp({ t: 1, i: 1 }) });
    try {
      await s.tryNext();
    } finally {
      await s.close();
    }
  }, 286);
});

test('pre- and post-images (whenAvailable) through the proxy match a plain store\'s, for documents that lived only in the archive', { timeout: 120_000 }, async () => {
  const client = await t.client();
  const shop = client.db('shop');
  const refShop = refClient.db('shop');
  const old = new Date(Date.now() - 400 * 86_400_000);
  // collMod through the proxy reaches both tiers, as DDL does.
  for (const db of [shop, refShop]) await db.command({ collMod: 'orders', changeStreamPreAndPostImages: { enabled: true } });
  await (await t.tierClient('archive')).db('shop').collection('orders').insertMany([{ _id: 'img1', date: old, v: 1 }, { _id: 'img2', date: old, v: 1 }]);
  await refShop.collection('orders').insertMany([{ _id: 'img1', date: old, v: 1 }, { _id: 'img2', date: old, v: 1 }]);
  const opts = { fullDocument: 'whenAvailable', fullDocumentBeforeChange: 'whenAvailable', maxAwaitTimeMS: 300 };
  const streams = [shop.collection('orders').watch([], opts), refShop.collection('orders').watch([], opts)];
  await Promise.all(streams.map((s) => s.tryNext()));
  for (const db of [shop, refShop]) {
    await db.collection('orders').updateOne({ _id: 'img1' }, { $set: { v: 2 } });
    await db.collection('orders').replaceOne({ _id: 'img1' }, { date: old, v: 3 });
    await db.collection('orders').deleteOne({ _id: 'img2' });
  }
  const seen = [];
  for (const s of streams) {
    const events = [];
    while (events.length < 3) {
      const e = await s.next();
      events.push({ op: e.operationType, id: e.documentKey._id, doc: e.fullDocument, before: e.fullDocumentBeforeChange });
    }
    await s.close();
    seen.push(events);
  }
  assert.deepEqual(seen[0], seen[1], `proxy: ${show(seen[0])}\nplain: ${show(seen[1])}`);
  assert.deepEqual(seen[1][0].before, { _id: 'img1', date: old, v: 1 }, 'the plain store kept no pre-image: the test proves nothing');
});
