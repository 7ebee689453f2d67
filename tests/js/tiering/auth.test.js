'use strict';
// The proxy in front of tiers that require authentication: both stores run with --auth,
// the proxy's tier URIs carry a user with only readWriteAnyDatabase (the fast tier's user
// has SCRAM-SHA-256 and SCRAM-SHA-1, negotiated to SHA-256; the archive's has SCRAM-SHA-1
// only, negotiated through saslSupportedMechs), and CRUD, routing to either tier, the
// feeder and the warmer work end to end. A wrong password in the config makes the proxy
// refuse to start with a log line naming the tier's URI key, never the password. Clients
// authenticate at the proxy itself (tiering/client_auth.test.js), never on its tier
// connections.

const { test, before, after, describe } = require('node:test');
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const { startTiered, show, AUTH_PROXY, CLIENT_DEFAULTS } = require('../lib/tiered');
const { expectServerError } = require('../lib/fixture');

const NS = 'shop.orders';
const OLD = new Date(Date.now() - 400 * 86_400_000);

describe('tiers with authentication', () => {
  let t;
  let orders;

  before(async () => {
    t = await startTiered({
      collections: [NS],
      horizon: '10m',
      startProxy: false,
      auth: { mechanisms: { archive: ['SCRAM-SHA-1'] } },
    });
    const archive = await t.tierClient('archive');
    const docs = [];
    for (let i = 0; i < 20; i++) {
      const date = i % 2 ? new Date(Date.now() - 30_000 - i * 1000) : new Date(OLD.getTime() + i * 1000);
      docs.push({ _id: i, date, v: i });
    }
    await archive.db('shop').collection('orders').insertMany(docs);
    await t.startProxy();
    await t.waitHealthy();
    await t.waitWarmDone(NS);
    orders = (await t.client()).db('shop').collection('orders');
  });
  after(async () => {
    if (t) await t.cleanup();
  });

  test('the tiers refuse unauthenticated clients (the setup is real)', async () => {
    const anon = new MongoClient(t.fast.uri(), CLIENT_DEFAULTS);
    try {
      await anon.connect();
      const err = await expectServerError(anon.db('shop').collection('orders').findOne({}), 13, 'Unauthorized');
      assert.match(err.message, /requires authentication/);
    } finally {
      await anon.close();
    }
  });

  test('the warmer copied the recent archive documents into the fast tier', async () => {
    const fast = await t.tierDocs('fast', NS);
    assert.deepEqual(
      fast.map((d) => d._id),
      [1, 3, 5, 7, 9, 11, 13, 15, 17, 19],
      `fast tier holds ${show(fast.map((d) => d._id))}`,
    );
  });

  test('reads route to the fast tier or the archive and answer in full', async () => {
    const before = await t.status();
    const recent = await orders.find({ date: { $gte: new Date(Date.now() - 5 * 60_000) } }).sort({ _id: 1 }).toArray();
    assert.deepEqual(recent.map((d) => d._id), [1, 3, 5, 7, 9, 11, 13, 15, 17, 19]);
    const all = await orders.find({}).sort({ _id: 1 }).toArray();
    assert.equal(all.length, 20);
    const after = await t.status();
    assert.ok(after.coll(NS).routing.fast > before.coll(NS).routing.fast, `fast counter: ${show(after.coll(NS).routing)}`);
    assert.ok(after.coll(NS).routing.archive > before.coll(NS).routing.archive, `archive counter: ${show(after.coll(NS).routing)}`);
  });

  test('writes through the proxy reach the fast tier and the feeder carries them to the archive', async () => {
    await orders.insertOne({ _id: 'new', date: new Date(), v: 1 });
    await orders.updateOne({ _id: 0 }, { $set: { v: 100 } }); // an archive-only document: a cold write
    await orders.deleteOne({ _id: 2 });
    await t.waitFeederCaughtUp();
    const archive = await t.tierDocs('archive', NS);
    const byId = new Map(archive.map((d) => [d._id, d]));
    assert.ok(byId.has('new'), 'the insert reached the archive');
    assert.equal(byId.get(0).v, 100, 'the update reached the archive');
    assert.ok(!byId.has(2), 'the delete reached the archive');
    const through = await orders.find({ _id: { $in: ['new', 0, 2] } }).sort({ _id: 1 }).toArray();
    assert.deepEqual(
      through.map((d) => [d._id, d.v]),
      [
        [0, 100],
        ['new', 1],
      ],
    );
  });

  test('clients authenticate at the proxy, never on its tier connections: logout ends only their own login', async () => {
    const c = await t.client({ maxPoolSize: 1 });
    const mine = c.db('shop').collection('orders');
    assert.ok((await mine.countDocuments({})) > 0);
    assert.equal((await c.db('admin').command({ logout: 1 })).ok, 1);
    const err = await expectServerError(mine.countDocuments({}), 13, 'Unauthorized');
    assert.match(err.message, /requires authentication/);
    // The proxy's own tier connections are still authenticated: other clients go on.
    assert.ok((await orders.countDocuments({})) > 0);
  });

  test('haloclineStatus reports both tiers reachable', async () => {
    const s = await t.status();
    assert.equal(s.reachable.fast, true);
    assert.equal(s.reachable.archive, true);
  });
});

describe('a wrong tier password', () => {
  let t;
  before(async () => {
    t = await startTiered({
      collections: [NS],
      startProxy: false,
      auth: { authMechanism: 'SCRAM-SHA-256', proxyPassword: 'not-the-password' },
    });
  });
  after(async () => {
    if (t) await t.cleanup();
  });

  test('makes the proxy refuse to start, naming the URI key and never the password', async () => {
    let err = null;
    try {
      await t.startProxy();
    } catch (e) {
      err = e;
    }
    assert.ok(err, 'the proxy started with a wrong password');
    assert.match(err.message, /exited \(code=1/, err.message);
    assert.match(err.message, /tiers\.(fast|archive)\.uri: Authentication failed for user 'haloProxy'/, err.message);
    assert.ok(!err.message.includes('not-the-password'), 'the password appears in the output');
    assert.ok(!err.message.includes(encodeURIComponent('not-the-password')), 'the password appears in the output');
  });

  test('with the right password and an explicit SCRAM-SHA-256 the proxy starts', async () => {
    delete t.auth.proxyPassword;
    await t.startProxy();
    await t.waitHealthy();
    const c = await t.client();
    await c.db('shop').collection('orders').insertOne({ _id: 1, date: new Date() });
    assert.equal(await c.db('shop').collection('orders').countDocuments({ _id: 1 }), 1);
    assert.ok(!t.proxy.proc.tail(200).includes(AUTH_PROXY.pwd), 'the password appears in the proxy log');
  });
});
