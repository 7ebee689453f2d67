'use strict';
// The proxy authenticates and authorizes its clients as mongos does (issue 16), against
// users and roles that exist only in the archive: real drivers log in through it with
// SCRAM-SHA-256 and SCRAM-SHA-1; a wrong password gets 18 and no credentials 13 on data
// commands; privileges are enforced per command and namespace, on tiered and untiered
// collections alike; a password change in the archive takes effect within the cache
// interval; cursors and sessions belong to their user.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { MongoClient, Long } = require('mongodb');
const { startTiered, waitUntil, show, CLIENT_DEFAULTS } = require('../lib/tiered');
const { expectServerError } = require('../lib/fixture');
const { mongoshJson } = require('../lib/mongosh');
const { runProgram } = require('../lib/run');
const { makeTempDir } = require('../lib/server');

const NS = 'shop.orders';
const PYTHON = process.env.HALO_PYTHON || '/usr/bin/python3';
let t;

const USERS = {
  alice: { pwd: 'alice-pw', roles: [{ role: 'readWrite', db: 'shop' }] },
  bob: { pwd: 'bob-pw', roles: [{ role: 'read', db: 'shop' }] },
  carol: { pwd: 'carol-pw', roles: [{ role: 'ordersReader', db: 'shop' }] },
  mon: { pwd: 'mon-pw', roles: [{ role: 'clusterMonitor', db: 'admin' }, { role: 'read', db: 'shop' }] },
  old: { pwd: 'old-pw', roles: [{ role: 'readWrite', db: 'shop' }], mechanisms: ['SCRAM-SHA-1'] },
  dave: { pwd: 'dave-pw', roles: [{ role: 'readWrite', db: 'shop' }] },
};

before(async () => {
  t = await startTiered({
    collections: [NS],
    horizon: '1h',
    auth: true,
    startProxy: false,
    extra: { security: { userCacheInvalidationIntervalSecs: 1 } },
  });
  const archive = await t.tierClient('archive');
  const shop = archive.db('shop');
  // A user-defined role: find on one collection only.
  await shop.command({
    createRole: 'ordersReader',
    privileges: [{ resource: { db: 'shop', collection: 'orders' }, actions: ['find'] }],
    roles: [],
  });
  for (const [user, u] of Object.entries(USERS)) {
    await shop.command({ createUser: user, pwd: u.pwd, roles: u.roles, ...(u.mechanisms ? { mechanisms: u.mechanisms } : {}) });
  }
  const now = Date.now();
  await shop.collection('orders').insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i, date: new Date(now - i * 60_000), v: i })));
  await shop.collection('plain').insertMany([{ _id: 1 }, { _id: 2 }]);
  await t.startProxy();
  await t.waitHealthy();
});
after(async () => {
  if (t) await t.cleanup();
});

function as(user, options = {}) {
  return t.client({ auth: { username: user, password: USERS[user].pwd }, authSource: 'shop', ...options });
}

test('drivers log in through the proxy with users that exist only in the archive', async () => {
  // They are not in the fast tier: the proxy reads them from the archive.
  const fastUsers = await (await t.tierClient('fast')).db('shop').command({ usersInfo: 1 });
  assert.deepEqual(fastUsers.users, []);
  for (const [user, mechanism] of [['alice', 'SCRAM-SHA-256'], ['alice', 'SCRAM-SHA-1'], ['old', undefined]]) {
    const c = await as(user, mechanism ? { authMechanism: mechanism } : {});
    const status = await c.db('admin').command({ connectionStatus: 1 });
    assert.deepEqual(status.authInfo.authenticatedUsers, [{ user, db: 'shop' }], show(status));
    assert.equal(await c.db('shop').collection('orders').countDocuments({}), 10);
  }
  // mongosh, pymongo and libmongoc too.
  const uri = t.uri().replace('mongodb://', 'mongodb://alice:alice-pw@') + '&authSource=shop';
  const sh = await mongoshJson(uri, "print(JSON.stringify(db.getSiblingDB('shop').orders.countDocuments({})))");
  assert.equal(sh, 10);
  const py = await runProgram(
    PYTHON,
    ['-c', 'import sys, pymongo; c = pymongo.MongoClient(sys.argv[1]); print(c.shop.orders.count_documents({}))', uri],
    { timeoutMs: 60_000 },
  );
  assert.equal(py.code, 0, py.stderr);
  assert.equal(py.stdout.trim(), '10');
  const probe = path.join(makeTempDir('halocline-mongoc-auth-'), 'probe');
  const src = `${probe}.c`;
  fs.writeFileSync(
    src,
    `#include <mongoc/mongoc.h>
int main(int argc, char **argv) {
  mongoc_init();
  mongoc_client_t *c = mongoc_client_new(argv[1]);
  mongoc_collection_t *coll = mongoc_client_get_collection(c, "shop", "orders");
  bson_error_t err; bson_t q = BSON_INITIALIZER;
  int64_t n = mongoc_collection_count_documents(coll, &q, NULL, NULL, NULL, &err);
  if (n < 0) { fprintf(stderr, "%s\\n", err.message); return 1; }
  printf("%lld\\n", (long long) n);
  mongoc_collection_destroy(coll); mongoc_client_destroy(c); mongoc_cleanup(); return 0;
}
`,
  );
  const flags = await runProgram('pkg-config', ['--cflags', '--libs', 'libmongoc-1.0']);
  const cc = await runProgram(process.env.CC || 'cc', ['-o', probe, src, ...flags.stdout.trim().split(/\s+/)]);
  assert.equal(cc.code, 0, cc.stderr);
  const mc = await runProgram(probe, [uri], { timeoutMs: 60_000 });
  assert.equal(mc.code, 0, mc.stderr);
  assert.equal(mc.stdout.trim(), '10');
});

test('a wrong password gets 18 and is logged and counted; no credentials gets 13 on data commands', async () => {
  const before = (await t.status()).raw.security.authenticationsFailed;
  const wrong = new MongoClient(t.uri(), { ...CLIENT_DEFAULTS, auth: { username: 'alice', password: 'nope' }, authSource: 'shop' });
  try {
    await assert.rejects(wrong.connect(), (e) => e.code === 18 || /Authentication failed/.test(e.message));
  } finally {
    await wrong.close();
  }
  assert.ok((await t.status()).raw.security.authenticationsFailed > before);
  // The line reaches our pipe after the reply may have: wait for it, do not race it.
  const failure = /"id":20249.*"Authentication failed".*"principalName":"alice"/;
  await waitUntil('the failed login is logged with id 20249',
    () => failure.test(t.proxy.proc.stdoutTail.concat(t.proxy.proc.stderrTail).join('\n')));

  const anon = await t.client({ auth: null });
  assert.equal((await anon.db('admin').command({ hello: 1 })).ok, 1);
  assert.equal((await anon.db('admin').command({ ping: 1 })).ok, 1);
  const err = await expectServerError(anon.db('shop').collection('orders').findOne({}), 13, 'Unauthorized');
  assert.match(err.message, /^command find requires authentication$/);
  await expectServerError(anon.db('shop').collection('plain').insertOne({ _id: 9 }), 13);
  await expectServerError(anon.db('admin').command({ haloclineStatus: 1 }), 13);
});

test('privileges are enforced per command and namespace, tiered and untiered alike', async () => {
  const bob = await as('bob');
  assert.equal(await bob.db('shop').collection('orders').countDocuments({}), 10);
  assert.equal(await bob.db('shop').collection('plain').countDocuments({}), 2);
  const denied = await expectServerError(bob.db('shop').collection('orders').insertOne({ _id: 'b', date: new Date() }), 13);
  assert.match(denied.message, /not authorized on shop to execute command/);
  await expectServerError(bob.db('shop').collection('plain').deleteOne({ _id: 1 }), 13);
  await expectServerError(bob.db('other').collection('x').findOne({}), 13);
  await expectServerError(bob.db('admin').command({ haloclineStatus: 1 }), 13);

  const carol = await as('carol');
  assert.equal((await carol.db('shop').collection('orders').find({ date: { $gte: new Date(Date.now() - 3_600_000) } }).toArray()).length, 10);
  assert.equal((await carol.db('shop').collection('orders').findOne({ _id: 3 })).v, 3);
  await expectServerError(carol.db('shop').collection('plain').findOne({}), 13);
  assert.equal(await carol.db('shop').collection('orders').countDocuments({}), 10);

  const mon = await as('mon');
  assert.equal((await mon.db('admin').command({ haloclineStatus: 1 })).ok, 1);
});

test('a password changed in the archive stops working through the proxy within the cache interval', async () => {
  const first = await as('dave');
  assert.equal(await first.db('shop').collection('plain').countDocuments({}), 2);
  const archive = await t.tierClient('archive');
  await archive.db('shop').command({ updateUser: 'dave', pwd: 'dave-new-pw' });
  await waitUntil('the old password to be refused', async () => {
    const c = new MongoClient(t.uri(), { ...CLIENT_DEFAULTS, auth: { username: 'dave', password: 'dave-pw' }, authSource: 'shop' });
    try {
      await c.connect();
      await c.db('shop').collection('plain').countDocuments({});
      return false;
    } catch (e) {
      return /Authentication failed/.test(e.message);
    } finally {
      await c.close();
    }
  }, { timeoutMs: 10_000 });
  const again = await t.client({ auth: { username: 'dave', password: 'dave-new-pw' }, authSource: 'shop' });
  assert.equal(await again.db('shop').collection('plain').countDocuments({}), 2);
});

test('another user\'s cursor and session are refused', async () => {
  const alice = await as('alice');
  const bob = await as('bob');
  const aliceSession = alice.startSession();
  try {
    const r = await alice.db('shop').command({ find: 'plain', batchSize: 1 }, { session: aliceSession });
    const err = await expectServerError(bob.db('shop').command({ getMore: Long.fromValue(r.cursor.id), collection: 'plain' }), 13);
    assert.match(err.message, /not authorized/);
    await expectServerError(bob.db('shop').command({ killCursors: 'plain', cursors: [r.cursor.id] }), 13);
    // Bob's driver made to send Alice's logical session id.
    const bobSession = bob.startSession();
    try {
      bobSession.serverSession.id = aliceSession.id;
      const e2 = await expectServerError(bob.db('shop').collection('plain').findOne({}, { session: bobSession }), 13);
      assert.match(e2.message, /session that belongs to another user/);
    } finally {
      await bobSession.endSession().catch(() => {});
    }
  } finally {
    await aliceSession.endSession();
  }
});

test('killSessions [] ends only the caller\'s sessions: another user\'s transaction goes on', async () => {
  const alice = await as('alice');
  const other = await as('old');
  const mine = alice.startSession();
  const theirs = other.startSession();
  try {
    for (const [c, s, id] of [[alice, mine, 'ka'], [other, theirs, 'kd']]) {
      s.startTransaction();
      await c.db('shop').collection('plain').insertOne({ _id: id }, { session: s });
    }
    assert.equal((await alice.db('admin').command({ killSessions: [] })).ok, 1);
    const err = await mine.commitTransaction().then(() => null, (e) => e);
    assert.ok(err, 'the caller\'s killed transaction committed');
    assert.equal(err.code, 251, show(err));
    await theirs.commitTransaction();
    const plain = alice.db('shop').collection('plain');
    assert.equal(await plain.countDocuments({ _id: { $in: ['ka', 'kd'] } }), 1);
    assert.equal(await plain.countDocuments({ _id: 'kd' }), 1);
    // killAllSessions needs killAnySession, which readWrite does not grant.
    await expectServerError(alice.db('admin').command({ killAllSessions: [] }), 13);
  } finally {
    await Promise.all([mine.endSession(), theirs.endSession()]);
  }
});
