'use strict';
// DDL, explain and policy checks through the proxy (issue 13, items 8, 9 and 11): an
// application index on the age field, explain naming the tier and the proof, and a policy
// that cannot work on the archive's data named at start, in haloclineStatus and in routing
// reasons.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startTiered, waitUntil, show } = require('../lib/tiered');

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
