'use strict';
// Cold writes (docs/CONSISTENCY.md, Cold writes): an update, findAndModify or delete of
// one document that lives only in the archive, and whose age the write leaves alone, runs
// in the archive under a guard in the fast tier, instead of copying the document up.
// Each test names the behaviour it checks against the tiers' own contents: where the
// document is, what the client was told, what the guard left behind.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { ObjectId, UUID, Long } = require('mongodb');
const W = require('../lib/wire');
const { startTiered, show } = require('../lib/tiered');

const NS = 'shop.orders';
const OLD = new Date(Date.now() - 400 * 86_400_000);
let t;
let orders;   // through the proxy
let archive;  // the archive's collection, directly
let fast;     // the fast tier's collection, directly
let guards;   // halocline.tombstones in the fast tier, directly

before(async () => {
  t = await startTiered({ collections: [NS], horizon: '10m', startProxy: false });
  const a = await t.tierClient('archive');
  const docs = [];
  for (let i = 0; i < 100; i++) docs.push({ _id: i, date: new Date(OLD.getTime() + i * 1000), n: i, kind: i % 3 });
  await a.db('shop').collection('orders').insertMany(docs);
  await t.startProxy();
  await t.waitHealthy();
  await t.waitWarmDone(NS);
  orders = (await t.client()).db('shop').collection('orders');
  archive = (await t.directClient('archive')).db('shop').collection('orders');
  fast = (await t.directClient('fast')).db('shop').collection('orders');
  guards = (await t.directClient('fast')).db('halocline').collection('tombstones');
});

after(async () => {
  if (t) await t.cleanup();
});

async function coldWrites() {
  return (await t.status()).coll(NS).routing.cold;
}

/** The guards go (they become marks after the replies), and no tombstone is left. */
async function noGuardsLeft() {
  await t.waitGuardsGone(NS);
  assert.deepEqual(await t.tombstones(NS), []);
}

/** The marks finished cold writes left on `ids`, as {id: number}. */
async function marksOn(ids) {
  const out = {};
  for (const m of await t.coldKeys(NS, 'mark')) if (ids.includes(m._id.id)) out[m._id.id] = Number(m.mark);
  return out;
}

async function raw() {
  return W.RawConnection.connect(t.proxy.port);
}

test('update, findAndModify and delete of archive-only documents run in the archive and copy nothing up', async () => {
  const before = await coldWrites();

  const u = await orders.updateOne({ _id: 1 }, { $inc: { n: 5 }, $set: { seen: true } });
  assert.deepEqual([u.matchedCount, u.modifiedCount, u.upsertedCount], [1, 1, 0]);
  assert.deepEqual(await archive.findOne({ _id: 1 }), { _id: 1, date: new Date(OLD.getTime() + 1000), n: 6, kind: 1, seen: true });
  // Read-your-writes through the proxy (the exact _id lookup goes to the archive).
  assert.equal((await orders.findOne({ _id: 1 })).n, 6);

  const fm = await orders.findOneAndUpdate({ _id: 2 }, { $set: { x: 1 } }, { returnDocument: 'after', projection: { x: 1, n: 1 } });
  assert.deepEqual(fm, { _id: 2, n: 2, x: 1 });

  const fr = await orders.findOneAndDelete({ _id: 3 });
  assert.equal(fr._id, 3);
  assert.equal(await archive.findOne({ _id: 3 }), null);
  assert.equal(await orders.findOne({ _id: 3 }), null);

  const d = await orders.deleteOne({ _id: 4 });
  assert.equal(d.deletedCount, 1);
  assert.equal(await archive.findOne({ _id: 4 }), null);

  const none = await orders.updateOne({ _id: 123456 }, { $set: { x: 1 } });
  assert.deepEqual([none.matchedCount, none.modifiedCount], [0, 0]);
  assert.equal(await archive.findOne({ _id: 123456 }), null);

  // Nothing was copied up, each write was counted, and the guards (marks after the
  // replies) go; no tombstone is left.
  assert.deepEqual(await fast.find({ _id: { $in: [1, 2, 3, 4, 123456] } }).toArray(), []);
  assert.equal(await coldWrites(), before + 5);
  await noGuardsLeft();
  const marks = await marksOn([1, 2, 3, 4, 123456]);
  assert.deepEqual(Object.keys(marks).sort(), ['1', '123456', '2', '3', '4'], show(marks));

  // A document written cold before is written cold again: its guard replaces the mark,
  // and the new mark is numbered after the old one.
  await orders.updateOne({ _id: 1 }, { $inc: { n: 1 } });
  assert.equal((await archive.findOne({ _id: 1 })).n, 7);
  assert.equal(await fast.findOne({ _id: 1 }), null);
  assert.equal(await coldWrites(), before + 6);
  await noGuardsLeft();
  const again = await marksOn([1]);
  assert.ok(again[1] > Math.max(...Object.values(marks)), show({ marks, again }));
});

test('writes that change the age field, upsert, replace or name no single _id still copy the document up', async () => {
  const before = await coldWrites();
  const now = new Date();
  await orders.updateOne({ _id: 10 }, { $set: { date: now } });
  assert.deepEqual(await fast.findOne({ _id: 10 }), { _id: 10, date: now, n: 10, kind: 1 });

  await orders.updateOne({ _id: 11 }, { $inc: { n: 1 } }, { upsert: true });
  assert.equal((await fast.findOne({ _id: 11 })).n, 12);

  await orders.replaceOne({ _id: 12 }, { date: new Date(OLD.getTime() + 12000), n: -12 });
  assert.equal((await fast.findOne({ _id: 12 })).n, -12);

  await orders.updateMany({ _id: { $in: [13, 14] } }, { $set: { many: true } });
  assert.equal(await fast.countDocuments({ _id: { $in: [13, 14] }, many: true }), 2);

  assert.equal(await coldWrites(), before);
});

test('a retry of a retryable cold write is applied once, also after the document was copied up', async () => {
  const c = await raw();
  try {
    const lsid = { id: new UUID() };
    const upd = { update: 'orders', updates: [{ q: { _id: 20 }, u: { $inc: { n: 100 } } }], lsid, txnNumber: 7n, $db: 'shop' };
    const first = await c.command(upd);
    assert.equal(first.ok, 1, show(first));
    assert.deepEqual([first.n, first.nModified], [1, 1], show(first));
    assert.equal((await archive.findOne({ _id: 20 })).n, 120);

    // The retry while the document still lives in the archive: the archive answers it
    // from its session record.
    const again = await c.command(upd);
    assert.deepEqual([again.ok, again.n, again.nModified], [1, 1, 1], show(again));
    assert.equal((await archive.findOne({ _id: 20 })).n, 120);

    // Another client's write copies the document up; the retry must not run there.
    await orders.updateOne({ _id: 20 }, { $set: { date: new Date() } });
    assert.equal((await fast.findOne({ _id: 20 })).n, 120);
    const late = await c.command(upd);
    assert.deepEqual([late.ok, late.n, late.nModified], [1, 1, 1], show(late));
    assert.equal((await fast.findOne({ _id: 20 })).n, 120);
    assert.equal((await orders.findOne({ _id: 20 })).n, 120);

    // The same for a retried delete.
    const del = { delete: 'orders', deletes: [{ q: { _id: 21 }, limit: 1 }], lsid, txnNumber: 8n, $db: 'shop' };
    const d1 = await c.command(del);
    assert.deepEqual([d1.ok, d1.n], [1, 1], show(d1));
    const d2 = await c.command(del);
    assert.deepEqual([d2.ok, d2.n], [1, 1], show(d2));
    assert.equal(await orders.findOne({ _id: 21 }), null);
  } finally {
    c.destroy();
  }
});

/** A guard as a writer takes it (cold_write.h), for `id`, holding `cmd`, taken `ageMs` ago. */
function guardFor(id, cmd, ageMs) {
  return { _id: { ns: NS, id }, cold: new ObjectId(), at: new Date(Date.now() - ageMs), cmd };
}

function incCommand(id, by, txnNumber) {
  return {
    update: 'orders',
    updates: [{ q: { _id: id }, u: { $inc: { n: by } } }],
    lsid: { id: new UUID() },
    txnNumber: Long.fromNumber(txnNumber),
    writeConcern: { w: 'majority', j: true },
    $db: 'shop',
  };
}

test('a guard whose writer died is finished by the next writer, whether or not its command had run', async () => {
  // Doc 30: the dead writer's command reached the archive; doc 31: it never did.
  const ran = incCommand(30, 1000, 1);
  const a = await W.RawConnection.connect(t.archive.port);
  try {
    const r = await a.command(ran);
    assert.deepEqual([r.ok, r.nModified], [1, 1], show(r));
  } finally {
    a.destroy();
  }
  await guards.insertOne(guardFor(30, ran, 60_000));
  await guards.insertOne(guardFor(31, incCommand(31, 1000, 1), 60_000));

  // Writes that copy the documents up meet the guards and finish them first.
  await orders.updateOne({ _id: 30 }, { $set: { date: new Date() } });
  await orders.updateOne({ _id: 31 }, { $set: { date: new Date() } });
  assert.equal((await fast.findOne({ _id: 30 })).n, 1030);
  assert.equal((await fast.findOne({ _id: 31 })).n, 1031);
  await noGuardsLeft();
  // The finished guards became marks, which the promotions then replaced.
  assert.deepEqual(await marksOn([30, 31]), {});
});

test('a live guard keeps the document out of the fast tier; reads and the feeder treat it as no delete', async () => {
  // Taken "in the future": it never looks abandoned by its own age.
  const cmd = incCommand(40, 1, 1);
  await guards.insertOne(guardFor(40, cmd, -600_000));
  // The feeder sees the guard's insert and must not delete the archive's document.
  await t.waitFeederCaughtUp();
  assert.equal((await archive.findOne({ _id: 40 })).n, 40);
  // Reads answer from the archive, as for any archive-only document.
  assert.equal((await orders.findOne({ _id: 40 })).n, 40);
  assert.equal((await orders.find({ kind: 1, n: { $gte: 40, $lt: 41 } }).limit(5).toArray()).length, 1);
  // A write that must copy it up waits for the guard, never with a WriteConflict: after
  // 5 s of waiting it finishes the guard itself (runs its command in the archive), then
  // copies up the document as that command left it.
  await orders.updateOne({ _id: 40 }, { $set: { date: new Date() } });
  assert.equal((await fast.findOne({ _id: 40 })).n, 41);
  await noGuardsLeft();
});
