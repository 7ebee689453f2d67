'use strict';
// DDL, explain, validation, admin helpers and policy checks through the proxy (issue 13,
// items 7-11): an application index on the age field, explain naming the tier and the
// proof, the archive's validator enforced (copies never refused), mongosh's admin helpers
// and currentOp/killOp over the proxy's own operations, and a policy that cannot work on
// the archive's data named at start, in haloclineStatus and in routing reasons.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startTiered, waitUntil, show } = require('../lib/tiered');
const { expectServerError } = require('../lib/fixture');
const { Binary } = require('mongodb');
const { mongoshJson } = require('../lib/mongosh');

const ISO = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/;
let t;

before(async () => {
  t = await startTiered({ collections: ['shop.orders'], horizon: '1h', guard: '1s' });
  await t.waitHealthy();
  await t.waitWarmDone('shop.orders');
});
after(async () => {
  if (t) await t.cleanup();
});

async function fastIndexNames() {
  const fast = await t.directClient('fast');
  return (await fast.db('shop').collection('orders').indexes()).map((i) => i.name).sort();
}

test('an application index on the age field replaces the proxy\'s own one, and dropping it brings that back', async () => {
  const client = await t.client();
  const orders = client.db('shop').collection('orders');
  await orders.insertOne({ _id: 'ix', date: new Date() });
  assert.ok((await fastIndexNames()).includes('halocline_age_date'));
  assert.equal(await orders.createIndex({ date: 1 }), 'date_1');
  assert.deepEqual(await fastIndexNames(), ['_id_', 'date_1']);
  // The application sees its own index (the archive's list), never the proxy's.
  assert.deepEqual((await orders.indexes()).map((i) => i.name).sort(), ['_id_', 'date_1']);
  // Creating it again is a no-op, as on mongod.
  assert.equal(await orders.createIndex({ date: 1 }), 'date_1');
  const recent = { date: { $gte: new Date(Date.now() - 60_000) } };
  assert.equal((await t.explain({ find: 'orders', filter: recent })).tier, 'fast');
  assert.equal(await orders.countDocuments(recent), 1);

  await orders.dropIndex('date_1');
  assert.deepEqual(await fastIndexNames(), ['_id_', 'halocline_age_date']);
  assert.deepEqual((await orders.indexes()).map((i) => i.name), ['_id_']);
  // Other indexes are untouched by all this.
  assert.equal(await orders.createIndex({ date: -1, v: 1 }), 'date_-1_v_1');
  assert.deepEqual(await fastIndexNames(), ['_id_', 'date_-1_v_1', 'halocline_age_date']);
  await orders.dropIndex('date_-1_v_1');
});

test('explain through the proxy names the tier and the proof beside the tier\'s own plan', async () => {
  const client = await t.client();
  const orders = client.db('shop').collection('orders');
  const fastExplain = await orders.find({ date: { $gte: new Date(Date.now() - 60_000) } }).explain();
  assert.ok(fastExplain.queryPlanner && fastExplain.queryPlanner.winningPlan, show(fastExplain));
  assert.equal(fastExplain.halocline.tier, 'fast', show(fastExplain.halocline));
  assert.equal(fastExplain.halocline.namespace, 'shop.orders');
  assert.match(fastExplain.halocline.reason, ISO);
  assert.ok(fastExplain.halocline.fastHoldsAbove instanceof Date, show(fastExplain.halocline));

  const archiveExplain = await orders.find({ v: 1 }).explain();
  assert.ok(archiveExplain.queryPlanner.winningPlan, show(archiveExplain));
  assert.equal(archiveExplain.halocline.tier, 'archive');
  assert.match(archiveExplain.halocline.reason, /does not bound date from below/);

  const idExplain = await orders.find({ _id: 'ix' }).explain();
  assert.equal(idExplain.halocline.tier, 'fast-then-archive');

  const plain = await client.db('shop').collection('untiered').find({}).explain();
  assert.equal(plain.halocline.tier, 'archive');
  assert.equal(plain.halocline.tiered, false);

  // haloclineExplain's reasons print dates, not milliseconds since the epoch.
  const e = await t.explain({ find: 'orders', filter: { date: { $gte: new Date(Date.now() - 60_000) } } });
  assert.match(e.reason, ISO);
  assert.doesNotMatch(e.reason, /\d{13}/);
});

test('a policy that does not fit the archive\'s data is named at start, in haloclineStatus and in routing reasons', async () => {
  const t2 = await startTiered({
    collections: [
      { namespace: 'app.users', ageField: '_id' },
      { namespace: 'app.events', ageField: 'ts' },
      { namespace: 'app.good', ageField: 'ts' },
    ],
    horizon: '1h',
    startProxy: false,
  });
  try {
    const archive = await t2.tierClient('archive');
    const db = archive.db('app');
    // YCSB-style string keys; events without the age field; good ones with dates.
    await db.collection('users').insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: `user${i}` })));
    await db.collection('events').insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: i, at: new Date() })));
    await db.collection('good').insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: i, ts: new Date() })));
    await t2.startProxy();
    const status = await waitUntil(
      'the policy check to report',
      async () => {
        const s = await t2.status();
        return s.coll('app.users').raw.policyProblem && s.coll('app.events').raw.policyProblem ? s : null;
      },
      { detail: async () => show((await t2.status()).raw) },
    );
    assert.match(status.coll('app.users').raw.policyProblem, /'_id' holds string instead of ObjectIds in 100 of 100 sampled documents of app\.users/);
    assert.match(status.coll('app.events').raw.policyProblem, /'ts' is missing from 100 of 100 sampled documents of app\.events/);
    assert.equal(status.coll('app.good').raw.policyProblem, undefined, show(status.coll('app.good').raw));
    const why = await t2.explain({ find: 'users', filter: { _id: { $gte: 'user1' } } }, 'app');
    assert.equal(why.tier, 'archive');
    assert.match(why.reason, /the policy cannot work as configured: the age field '_id' holds string/);
    // The log says so too, naming the collection.
    const log = t2.proxy.proc.stdoutTail.concat(t2.proxy.proc.stderrTail).join('\n');
    assert.match(log, /"A tiered collection's policy does not fit its data".*app\.users/);
  } finally {
    await t2.cleanup();
  }
});

test('the archive\'s validator is enforced through the proxy; copies are never refused', async () => {
  const t2 = await startTiered({ collections: ['shop.checked'], horizon: '1h', startProxy: false });
  try {
    const archiveDb = (await t2.tierClient('archive')).db('shop');
    const validator = { $jsonSchema: { required: ['amount'], properties: { amount: { bsonType: 'number', minimum: 0 } } } };
    await archiveDb.createCollection('checked', { validator });
    // A recent document that predates the validator: the warmer must still copy it up.
    await archiveDb.collection('checked').insertOne({ _id: 'legacy', date: new Date(), amount: -5 }, { bypassDocumentValidation: true });
    await t2.startProxy();
    await t2.waitHealthy();
    await t2.waitWarmDone('shop.checked');
    assert.equal((await t2.tierDocs('fast', 'shop.checked', { _id: 'legacy' })).length, 1);

    const client = await t2.client();
    const coll = client.db('shop').collection('checked');
    const err = await expectServerError(coll.insertOne({ _id: 'bad', date: new Date(), amount: -1 }), 121);
    assert.equal(err.errInfo.failingDocumentId, 'bad', show(err.errInfo));
    assert.equal(err.errInfo.details.operatorName, '$jsonSchema');
    await coll.insertOne({ _id: 'good', date: new Date(), amount: 1 });
    await expectServerError(coll.updateOne({ _id: 'good' }, { $set: { amount: -2 } }), 121);
    // The application sees the archive's options.
    const [info] = await client.db('shop').listCollections({ name: 'checked' }).toArray();
    assert.deepEqual(info.options.validator, validator);

    // collMod through the proxy changes both tiers.
    await client.db('shop').command({ collMod: 'checked', validationAction: 'warn' });
    await coll.insertOne({ _id: 'warned', date: new Date(), amount: -3 });
    // The archive becomes strict again on its own: the feeder's copy of a document the
    // fast tier accepted is refused with 121, and made again bypassing validation.
    await archiveDb.command({ collMod: 'checked', validationAction: 'error' });
    await coll.insertOne({ _id: 'late', date: new Date(), amount: -4 });
    const status = await t2.waitFeederCaughtUp();
    assert.equal(status.coll('shop.checked').raw.refused, undefined, show(status.raw));
    const archived = await archiveDb.collection('checked').find({ _id: { $in: ['warned', 'late'] } }).sort({ _id: 1 }).toArray();
    assert.deepEqual(archived.map((d) => d.amount), [-4, -3]);
  } finally {
    await t2.cleanup();
  }
});

test('mongosh\'s admin helpers through the proxy: stats, currentOp, killOp, validate, compact, top, connPoolStats, profiling', async () => {
  const client = await t.client();
  const orders = client.db('shop').collection('orders');
  await orders.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: `h${i}`, date: new Date(), pad: 'x'.repeat(100) })));
  await t.waitFeederCaughtUp();
  const fastCount = (await t.tierDocs('fast', 'shop.orders')).length;
  const archiveCount = (await t.tierDocs('archive', 'shop.orders')).length;
  const out = await mongoshJson(
    t.uri(),
    `db = db.getSiblingDB('shop');
     const s = db.orders.stats();
     const cs = db.orders.aggregate([{$collStats: {storageStats: {}, count: {}}}]).toArray()[0];
     const ops = db.currentOp();
     const mine = ops.inprog.find((o) => o.command && o.command.aggregate === 1);
     const kill = db.killOp(123456789);
     const v = db.orders.validate();
     const c = db.runCommand({compact: 'orders'});
     const top = db.adminCommand({top: 1});
     const pool = db.adminCommand({connPoolStats: 1});
     const was = db.setProfilingLevel(1, {slowms: 50});
     const prof = db.getProfilingStatus();
     db.setProfilingLevel(0);
     print(JSON.stringify({count: Number(s.count), dataSize: db.orders.dataSize(), totalSize: db.orders.totalSize(),
       cs: Number(cs.count), fast: cs.halocline && Number(cs.halocline.fast.count),
       mine: mine && {tier: mine.halocline.tier, active: mine.active, op: mine.op},
       kill: kill.ok, valid: v.valid, compact: c.ok, top: top.ok && Object.keys(top.totals).length > 0,
       pool: pool.ok && Object.keys(pool.hosts).length, was: was.ok, slowms: prof.slowms}));`,
  );
  assert.equal(out.count, archiveCount, show(out));
  assert.equal(out.cs, archiveCount, show(out));
  assert.equal(out.fast, fastCount, show(out));
  assert.ok(out.dataSize > 0 && out.totalSize > 0, show(out));
  assert.deepEqual(out.mine, { tier: 'proxy', active: true, op: 'command' }, show(out));
  assert.equal(out.kill, 1);
  assert.equal(out.valid, true);
  assert.equal(out.compact, 1);
  assert.equal(out.top, true);
  assert.equal(out.pool, 2, show(out));
  assert.equal(out.was, 1);
  assert.equal(out.slowms, 50);
});

test('killOp through the proxy interrupts an operation waiting in the proxy, which currentOp shows with its tier', async () => {
  // A proxy without workers: an archive read that cannot be merged waits for a feeder that never runs.
  const t3 = await startTiered({ collections: ['shop.orders'], horizon: '1h', workers: false, causalWaitTimeout: '60s' });
  try {
    const client = await t3.client();
    const orders = client.db('shop').collection('orders');
    await orders.insertOne({ _id: 'w', date: new Date() });
    // A $group by a field cannot be merged: it waits for the feeder.
    const pending = orders.aggregate([{ $match: { v: 1 } }, { $group: { _id: '$v', n: { $sum: 1 } } }], { comment: 'waits' }).toArray().then(
      () => null,
      (e) => e,
    );
    const admin = await t3.client();
    const op = await waitUntil('the waiting count in currentOp', async () => {
      const ops = (await admin.db('admin').command({ currentOp: 1 })).inprog;
      return ops.find((o) => o.command && o.command.comment === 'waits');
    });
    assert.equal(op.ns, 'shop.orders');
    assert.equal(op.halocline.tier, 'fast', show(op)); // the ping for read-your-writes
    assert.equal((await admin.db('admin').command({ killOp: 1, op: op.opid })).ok, 1);
    const err = await pending;
    assert.ok(err, 'the aggregate was not interrupted');
    assert.equal(err.code, 11601, show(err));
  } finally {
    await t3.cleanup();
  }
});

test('dropping a tiered collection waits until the feeder applied the writes before it: none comes back in the archive', { timeout: 120_000 }, async () => {
  const client = await t.client();
  const admin = client.db('admin');
  const coll = client.db('shop').collection('orders');
  const archive = (await t.directClient('archive')).db('shop').collection('orders');
  await coll.insertOne({ _id: 'before-drop', date: new Date() });
  // The feeder paused: the insert has not reached the archive when the drop is sent.
  await admin.command({ haloclinePauseFeeder: 600_000 });
  await coll.insertOne({ _id: 'paused', date: new Date() });
  let dropped = false;
  const drop = coll.drop().then(() => {
    dropped = true;
  });
  // The drop waits for the feeder, which is paused (nothing but the resume ends the wait).
  await waitUntil('the drop to be waiting in the proxy', async () => {
    const ops = await admin.aggregate([{ $currentOp: {} }, { $match: { 'command.drop': 'orders' } }]).toArray();
    return ops.length > 0;
  });
  assert.equal(dropped, false, 'the drop finished while the feeder was paused: a write before it could reach the dropped archive collection afterwards');
  await admin.command({ haloclinePauseFeeder: 0 });
  await drop;
  await admin.command({ haloclineFlushFeeder: 1 });
  assert.deepEqual(await archive.find().toArray(), [], 'a document written before the drop came back in the archive');
  // The same ids are free again, through the proxy's duplicate check against the archive.
  await coll.insertMany([{ _id: 'before-drop', date: new Date() }, { _id: 'paused', date: new Date() }]);
  assert.equal(await coll.countDocuments({}), 2);
});

test('a write with a collation or let matches the documents that live only in the archive, as on one mongod', { timeout: 60_000 }, async () => {
  const old = new Date(Date.now() - 400 * 86_400_000);
  const archive = (await t.directClient('archive')).db('shop').collection('orders');
  await archive.insertMany([
    { _id: 'c-alice', name: 'Alice', date: old },
    { _id: 'c-bob', name: 'Bob', date: old },
    { _id: 'c-carol', name: 'Carol', date: old },
  ]);
  const orders = (await t.client()).db('shop').collection('orders');
  const caseless = { locale: 'en', strength: 2 };
  const u = await orders.updateOne({ name: 'alice' }, { $set: { v: 1 } }, { collation: caseless });
  assert.equal(u.matchedCount, 1, 'an update under a case-insensitive collation missed the archive-only document');
  const f = await orders.findOneAndUpdate({ name: 'carol' }, { $set: { v: 3 } }, { collation: caseless, returnDocument: 'after' });
  assert.equal(f && f.v, 3, `findAndModify under a collation: ${show(f)}`);
  const d = await orders.deleteMany({ $expr: { $eq: ['$name', '$$who'] } }, { let: { who: 'Bob' } });
  assert.equal(d.deletedCount, 1, 'a delete with let missed the archive-only document');
  const u2 = await orders.updateMany({ $expr: { $eq: ['$name', '$$who'] } }, { $set: { w: 1 } }, { let: { who: 'Alice' } });
  assert.equal(u2.matchedCount, 1, 'an update with let missed the document');
  const left = await orders.find({ _id: { $in: ['c-alice', 'c-bob', 'c-carol'] } }).sort({ _id: 1 }).toArray();
  assert.deepEqual(left.map((x) => [x._id, x.v, x.w]), [['c-alice', 1, 1], ['c-carol', 3, undefined]]);
});

test('findOneAndDelete with a projection returns the removed document projected, also for one that lived only in the archive', async () => {
  const old = new Date(Date.now() - 400 * 86_400_000);
  await (await t.directClient('archive')).db('shop').collection('orders').insertOne({ _id: 'p-old', date: old, a: 1, b: [1, 2, 3] });
  const orders = (await t.client()).db('shop').collection('orders');
  await orders.insertOne({ _id: 'p-new', date: new Date(), a: 2, b: [4, 5] });
  const one = await orders.findOneAndDelete({ _id: 'p-old' }, { projection: { a: 1, _id: 0 } });
  assert.deepEqual(one, { a: 1 });
  const two = await orders.findOneAndDelete({ _id: 'p-new', b: 5 }, { projection: { 'b.$': 1 } });
  assert.deepEqual(two, { _id: 'p-new', b: [5] });
  assert.equal(await orders.countDocuments({ _id: { $in: ['p-old', 'p-new'] } }), 0);
  // A bad projection fails before anything is removed, as on mongod.
  await orders.insertOne({ _id: 'p-bad', date: new Date(), a: 3 });
  await expectServerError(orders.findOneAndDelete({ _id: 'p-bad' }, { projection: { a: 1, b: 0 } }), 31254);
  assert.equal(await orders.countDocuments({ _id: 'p-bad' }), 1);
});

test('killSessions, killAllSessions and killAllSessionsByPattern through the proxy end the client\'s sessions, never the proxy\'s own sessions on the tiers', async () => {
  const client = await t.client();
  const shop = client.db('shop');
  const orders = shop.collection('orders');
  const now = Date.now();
  await orders.insertMany([1, 2, 3].map((i) => ({ _id: `ks${i}`, date: new Date(now - i) })));
  await shop.collection('plain').insertOne({ _id: 'ks' });

  // A session of the proxy's own kind (its workers' lsid prefix) holds a
  // transaction open on the fast tier, beside the client's sessions.
  const fast = await t.directClient('fast');
  const internal = fast.startSession();
  internal.serverSession.id = { id: new Binary(Buffer.from('haloclInkillsess'), Binary.SUBTYPE_UUID) };
  internal.startTransaction();
  await fast.db('shop').collection('internal').insertOne({ _id: 1 }, { session: internal });

  // Session A: a cursor on the tiered collection, killed by name.
  const a = client.startSession();
  const r = await shop.command({ find: 'orders', filter: { _id: /^ks/ }, batchSize: 1 }, { session: a });
  assert.notEqual(Number(r.cursor.id), 0);
  assert.equal((await client.db('admin').command({ killSessions: [a.id] })).ok, 1);
  await expectServerError(shop.command({ getMore: r.cursor.id, collection: 'orders' }, { session: a }), 43);

  // Session B: a transaction, ended by killAllSessions [] (every client session).
  const b = client.startSession();
  b.startTransaction();
  await shop.collection('plain').updateOne({ _id: 'ks' }, { $set: { v: 1 } }, { session: b });
  assert.equal((await client.db('admin').command({ killAllSessions: [] })).ok, 1);
  assert.equal((await client.db('admin').command({ killSessions: [] })).ok, 1);
  assert.equal((await client.db('admin').command({ killAllSessionsByPattern: [{}] })).ok, 1);
  assert.equal((await client.db('admin').command({ killAllSessionsByPattern: [] })).ok, 1);
  const err = await b.commitTransaction().then(() => null, (e) => e);
  assert.ok(err, 'the killed transaction committed');
  assert.equal(err.code, 251, show(err));
  assert.equal((await shop.collection('plain').findOne({ _id: 'ks' })).v, undefined);

  // The proxy's own session was spared: its transaction still commits.
  await internal.commitTransaction();
  assert.equal(await fast.db('shop').collection('internal').countDocuments({ _id: 1 }), 1);
  await Promise.all([a, b, internal].map((s) => s.endSession()));

  // Bad arguments get mongod's errors; the proxy's workers go on.
  await expectServerError(client.db('admin').command({ killSessions: 'all' }), 14);
  await expectServerError(client.db('admin').command({ killSessions: [{}] }), 40414);
  await orders.insertOne({ _id: 'ks-after', date: new Date() });
  assert.equal((await orders.findOne({ _id: 'ks-after' }))._id, 'ks-after');
});

test('$out and $merge from a tiered collection write every acknowledged document; into a tiered collection they are refused', async () => {
  const client = await t.client();
  const shop = client.db('shop');
  const orders = shop.collection('orders');
  // Just written: in the fast tier, maybe not yet in the archive where $out runs.
  const now = Date.now();
  await orders.insertMany([1, 2, 3].map((i) => ({ _id: `out${i}`, date: new Date(now - i), v: i })));
  const route = await t.explain({ aggregate: 'orders', pipeline: [{ $match: { _id: /^out/ } }, { $out: 'outReport' }], cursor: {} });
  assert.equal(route.tier, 'archive', show(route));
  await orders.aggregate([{ $match: { _id: /^out/ } }, { $project: { v: 1 } }, { $out: 'outReport' }]).toArray();
  assert.deepEqual(await shop.collection('outReport').find().sort({ _id: 1 }).toArray(), [1, 2, 3].map((v) => ({ _id: `out${v}`, v })));
  await orders.updateOne({ _id: 'out2' }, { $set: { v: 20 } });
  await orders.aggregate([{ $match: { _id: 'out2' } }, { $project: { v: 1 } }, { $merge: { into: 'outReport', whenMatched: 'replace' } }]).toArray();
  assert.equal((await shop.collection('outReport').findOne({ _id: 'out2' })).v, 20);

  // Into the tiered collection: from an untiered one, from $documents, with either stage.
  await expectServerError(shop.collection('outReport').aggregate([{ $out: 'orders' }]).toArray(), 115);
  await expectServerError(shop.collection('outReport').aggregate([{ $merge: { into: { db: 'shop', coll: 'orders' } } }]).toArray(), 115);
  await expectServerError(shop.aggregate([{ $documents: [{ _id: 'x' }] }, { $merge: 'orders' }]).toArray(), 115);
  await expectServerError(orders.aggregate([{ $out: { db: 'shop', coll: 'orders' } }]).toArray(), 115);
  assert.equal(await orders.countDocuments({ _id: 'x' }), 0);
});
