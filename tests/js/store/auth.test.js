'use strict';
// Authentication and authorization in the store (`halocline store --auth`): the localhost
// exception for the first user, SCRAM-SHA-256 and SCRAM-SHA-1 with the Node driver (default
// negotiation, explicit mechanisms, speculative authentication in hello), the SASL
// conversation by hand (with and without skipEmptyExchange), mongod's errors (18, 13, 31,
// 51003, 11), built-in roles, user management (create/update/grant/revoke/drop/usersInfo),
// and mongosh, pymongo and libmongoc logging in.

const { test, before, after, describe } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { MongoClient, Binary } = require('mongodb');
const { startStore, makeTempDir } = require('../lib/server');
const { expectServerError, CLIENT_DEFAULTS } = require('../lib/fixture');
const { runProgram } = require('../lib/run');
const { mongoshJson } = require('../lib/mongosh');

const PYTHON = process.env.HALO_PYTHON || '/usr/bin/python3';

let server;
const clients = [];

/** A connected client; `user`/`pwd` log in (authSource admin unless given). */
async function connect({ user, pwd, authSource = 'admin', mechanism, options = {} } = {}) {
  const params = {};
  if (mechanism) params.authMechanism = mechanism;
  const c = new MongoClient(server.uri(params), {
    ...CLIENT_DEFAULTS,
    ...(user ? { auth: { username: user, password: pwd }, authSource } : {}),
    ...options,
  });
  clients.push(c);
  await c.connect();
  return c;
}

before(async () => {
  server = await startStore({ replSet: 'rs0', extraArgs: ['--auth'] });
});
after(async () => {
  for (const c of clients) await c.close().catch(() => {});
  if (server) await server.cleanup();
});

describe('the localhost exception', () => {
  test('before any user exists, only creating a user on admin is allowed', async () => {
    const anon = await connect();
    const err = await expectServerError(anon.db('app').collection('c').findOne({}), 13, 'Unauthorized');
    assert.match(err.message, /^not authorized on app to execute command \{/);
    await expectServerError(anon.db('app').command({ createUser: 'x', pwd: 'x', roles: ['read'] }), 13, 'Unauthorized');
    // hello, ping and buildInfo never need authentication.
    assert.equal((await anon.db('admin').command({ ping: 1 })).ok, 1);
    assert.match((await anon.db('admin').command({ buildInfo: 1 })).version, /^\d+\.\d+\.\d+$/);
    await anon.db('admin').command({ createUser: 'root', pwd: 'root-pw', roles: ['root'] });
  });

  test('once a user exists, unauthenticated commands need authentication', async () => {
    const anon = await connect();
    const err = await expectServerError(anon.db('app').collection('c').findOne({}), 13, 'Unauthorized');
    assert.equal(err.message, 'Command find requires authentication');
    await expectServerError(
      anon.db('admin').command({ createUser: 'late', pwd: 'x', roles: ['root'] }),
      13,
      'Unauthorized',
    );
    const status = await anon.db('admin').command({ connectionStatus: 1 });
    assert.deepEqual(status.authInfo.authenticatedUsers, []);
  });
});

describe('users and roles', () => {
  let root;
  before(async () => {
    root = await connect({ user: 'root', pwd: 'root-pw' });
    const admin = root.db('admin');
    await admin.command({ createUser: 'sha1only', pwd: 'sha1-pw', roles: ['root'], mechanisms: ['SCRAM-SHA-1'] });
    await root.db('app').command({ createUser: 'reader', pwd: 'reader-pw', roles: ['read'] });
    await root.db('app').command({ createUser: 'writer', pwd: 'writer-pw', roles: [{ role: 'readWrite', db: 'app' }] });
    await admin.command({ createUser: 'monitor', pwd: 'monitor-pw', roles: ['clusterMonitor'] });
    await root.db('app').collection('c').insertMany([{ _id: 1 }, { _id: 2 }]);
  });

  test('the root user (SCRAM-SHA-256 negotiated) reads and writes; connectionStatus names it', async () => {
    const status = await root.db('admin').command({ connectionStatus: 1 });
    assert.deepEqual(status.authInfo.authenticatedUsers, [{ user: 'root', db: 'admin' }]);
    assert.deepEqual(status.authInfo.authenticatedUserRoles, [{ role: 'root', db: 'admin' }]);
    assert.equal(await root.db('app').collection('c').countDocuments({}), 2);
  });

  test('users on $external (x.509 subjects) have no password and cannot log in with SCRAM', async () => {
    const ext = root.db('$external');
    const subject = 'CN=app-client,O=Example';
    await ext.command({ createUser: subject, roles: [{ role: 'read', db: 'app' }] });
    const info = await ext.command({ usersInfo: subject, showCredentials: true });
    assert.equal(info.users.length, 1);
    assert.deepEqual(info.users[0].mechanisms, ['external']);
    assert.deepEqual(info.users[0].credentials, { external: true });
    await expectServerError(ext.command({ createUser: 'CN=other', pwd: 'x', roles: [] }), 2, 'BadValue');
    await expectServerError(ext.command({ updateUser: subject, pwd: 'x' }), 2, 'BadValue');
    // Changing its roles keeps it external.
    await ext.command({ updateUser: subject, roles: [{ role: 'readWrite', db: 'app' }] });
    const again = await ext.command({ usersInfo: subject, showCredentials: true });
    assert.deepEqual(again.users[0].credentials, { external: true });
    assert.deepEqual(again.users[0].roles, [{ role: 'readWrite', db: 'app' }]);
    await assert.rejects(connect({ user: subject, pwd: 'anything', authSource: '$external', mechanism: 'SCRAM-SHA-256' }), (e) => e.code === 18 || /Authentication failed/.test(e.message));
    await ext.command({ dropUser: subject });
  });

  test('explicit SCRAM-SHA-256 and SCRAM-SHA-1 both work for a user holding both', async () => {
    for (const mechanism of ['SCRAM-SHA-256', 'SCRAM-SHA-1']) {
      const c = await connect({ user: 'root', pwd: 'root-pw', mechanism });
      assert.equal(await c.db('app').collection('c').countDocuments({}), 2, mechanism);
    }
  });

  test('a SCRAM-SHA-1-only user: negotiated through saslSupportedMechs; SHA-256 refused', async () => {
    const anon = await connect();
    const hello = await anon.db('admin').command({ hello: 1, saslSupportedMechs: 'admin.sha1only' });
    assert.deepEqual(hello.saslSupportedMechs, ['SCRAM-SHA-1']);
    const both = await anon.db('admin').command({ hello: 1, saslSupportedMechs: 'admin.root' });
    assert.deepEqual(both.saslSupportedMechs, ['SCRAM-SHA-1', 'SCRAM-SHA-256']);
    const none = await anon.db('admin').command({ hello: 1, saslSupportedMechs: 'admin.nobody' });
    assert.equal(none.saslSupportedMechs, undefined);

    const c = await connect({ user: 'sha1only', pwd: 'sha1-pw' });
    assert.equal(await c.db('app').collection('c').countDocuments({}), 2);
    await assert.rejects(connect({ user: 'sha1only', pwd: 'sha1-pw', mechanism: 'SCRAM-SHA-256' }), (e) => {
      assert.equal(e.code, 18, e.message);
      return true;
    });
  });

  test('a wrong password or an unknown user fails with 18 "Authentication failed."', async () => {
    for (const [user, pwd] of [
      ['root', 'wrong'],
      ['nobody', 'x'],
      ['reader', 'reader-pw'], // exists on app, not on admin
    ]) {
      await assert.rejects(connect({ user, pwd }), (e) => {
        assert.equal(e.code, 18, `${user}: ${e.message}`);
        assert.equal(e.codeName, 'AuthenticationFailed');
        assert.match(e.message, /Authentication failed\./);
        return true;
      });
    }
    const c = await connect({ user: 'reader', pwd: 'reader-pw', authSource: 'app' });
    assert.equal(await c.db('app').collection('c').countDocuments({}), 2);
  });

  test('read: find yes; insert, other databases and user management no (13)', async () => {
    const c = await connect({ user: 'reader', pwd: 'reader-pw', authSource: 'app' });
    assert.equal((await c.db('app').collection('c').find({}).toArray()).length, 2);
    const err = await expectServerError(c.db('app').collection('c').insertOne({ _id: 3 }), 13, 'Unauthorized');
    assert.match(err.message, /^not authorized on app to execute command \{.*"insert" ?: ?"c"/);
    await expectServerError(c.db('other').collection('c').findOne({}), 13, 'Unauthorized');
    await expectServerError(c.db('app').command({ createUser: 'x', pwd: 'x', roles: ['read'] }), 13, 'Unauthorized');
    await expectServerError(c.db('admin').command({ serverStatus: 1 }), 13, 'Unauthorized');
    // Every user may see itself.
    const self = await c.db('app').command({ usersInfo: 'reader' });
    assert.equal(self.users.length, 1);
    await expectServerError(c.db('app').command({ usersInfo: 'writer' }), 13, 'Unauthorized');
    // listDatabases shows only the databases the user has a role on.
    const dbs = await c.db('admin').command({ listDatabases: 1, nameOnly: true });
    assert.deepEqual(dbs.databases.map((d) => d.name), ['app']);
  });

  test('readWrite writes its database only; clusterMonitor sees serverStatus, not data', async () => {
    const w = await connect({ user: 'writer', pwd: 'writer-pw', authSource: 'app' });
    await w.db('app').collection('w').insertOne({ _id: 1 });
    await w.db('app').collection('w').updateOne({ _id: 1 }, { $set: { x: 1 } });
    await expectServerError(w.db('other').collection('w').insertOne({ _id: 1 }), 13, 'Unauthorized');
    await expectServerError(w.db('app').command({ collMod: 'w' }), 13, 'Unauthorized');
    const m = await connect({ user: 'monitor', pwd: 'monitor-pw' });
    assert.equal((await m.db('admin').command({ serverStatus: 1 })).ok, 1);
    assert.equal((await m.db('admin').command({ replSetGetStatus: 1 })).ok, 1);
    await expectServerError(m.db('app').collection('c').findOne({}), 13, 'Unauthorized');
  });

  test('change streams: a database stream needs read there, a cluster stream readAnyDatabase', async () => {
    const r = await connect({ user: 'reader', pwd: 'reader-pw', authSource: 'app' });
    const cs = r.db('app').watch();
    await cs.tryNext(); // opens the cursor
    await cs.close();
    await expectServerError(
      r.db('admin').command({ aggregate: 1, pipeline: [{ $changeStream: { allChangesForCluster: true } }], cursor: {} }),
      13,
      'Unauthorized',
    );
    const cluster = root.watch();
    await cluster.tryNext();
    await cluster.close();
  });

  test('usersInfo: mechanisms shown, credentials only on request, in mongod\'s shape', async () => {
    const info = await root.db('app').command({ usersInfo: 1 });
    assert.deepEqual(info.users.map((u) => u._id), ['app.reader', 'app.writer']);
    const reader = info.users[0];
    assert.equal(reader.user, 'reader');
    assert.equal(reader.db, 'app');
    assert.equal(reader.userId.sub_type, 4);
    assert.deepEqual(reader.roles, [{ role: 'read', db: 'app' }]);
    assert.deepEqual(reader.mechanisms, ['SCRAM-SHA-1', 'SCRAM-SHA-256']);
    assert.equal(reader.credentials, undefined);
    const withCreds = await root.db('admin').command({ usersInfo: { user: 'root', db: 'admin' }, showCredentials: true });
    const creds = withCreds.users[0].credentials;
    assert.deepEqual(Object.keys(creds).sort(), ['SCRAM-SHA-1', 'SCRAM-SHA-256']);
    assert.equal(creds['SCRAM-SHA-256'].iterationCount, 15000);
    assert.equal(creds['SCRAM-SHA-1'].iterationCount, 10000);
    for (const k of ['salt', 'storedKey', 'serverKey']) assert.equal(typeof creds['SCRAM-SHA-256'][k], 'string');
    // Ordered as mongod orders user names: by user, then database.
    const all = await root.db('admin').command({ usersInfo: { forAllDBs: true } });
    assert.deepEqual(
      all.users.map((u) => u._id),
      ['admin.monitor', 'app.reader', 'admin.root', 'admin.sha1only', 'app.writer'],
    );
    const direct = await root.db('admin').collection('system.users').findOne({ _id: 'app.reader' });
    assert.ok(direct.credentials['SCRAM-SHA-256'].storedKey);
  });

  test('createUser errors: unknown role 31, duplicate 51003, missing pwd 2', async () => {
    const app = root.db('app');
    let err = await expectServerError(app.command({ createUser: 'u', pwd: 'p', roles: ['nosuchrole'] }), 31, 'RoleNotFound');
    assert.equal(err.message, 'Could not find role: nosuchrole@app');
    await expectServerError(app.command({ createUser: 'u', pwd: 'p', roles: ['readAnyDatabase'] }), 31);
    err = await expectServerError(app.command({ createUser: 'reader', pwd: 'p', roles: [] }), 51003);
    assert.equal(err.message, 'User "reader@app" already exists');
    await expectServerError(app.command({ createUser: 'u', roles: [] }), 2, 'BadValue');
    await expectServerError(app.command({ createUser: 'u', pwd: 'p\u00e9', roles: [], mechanisms: ['SCRAM-SHA-256'] }), 2);
    await expectServerError(app.command({ createUser: 'u', pwd: 'p', roles: [], mechanisms: ['PLAIN'] }), 2);
    // Restrictions the store cannot enforce are refused, not ignored.
    await expectServerError(
      app.command({ createUser: 'u', pwd: 'p', roles: [], authenticationRestrictions: [{ clientSource: ['10.0.0.1'] }] }),
      2,
    );
  });

  test('updateUser changes the password and roles; dropUser removes the user at once', async () => {
    const app = root.db('app');
    await app.command({ createUser: 'temp', pwd: 'old-pw', roles: ['read'] });
    const t = await connect({ user: 'temp', pwd: 'old-pw', authSource: 'app' });
    await expectServerError(t.db('app').collection('c').insertOne({ _id: 9 }), 13);
    await app.command({ updateUser: 'temp', roles: ['readWrite'] });
    await t.db('app').collection('c').insertOne({ _id: 9 }); // roles re-read on the next command
    await app.command({ updateUser: 'temp', pwd: 'new-pw' });
    await assert.rejects(connect({ user: 'temp', pwd: 'old-pw', authSource: 'app' }), (e) => e.code === 18);
    await connect({ user: 'temp', pwd: 'new-pw', authSource: 'app' });
    await expectServerError(app.command({ updateUser: 'ghost', roles: [] }), 11, 'UserNotFound');
    await app.command({ dropUser: 'temp' });
    const err = await expectServerError(t.db('app').collection('c').findOne({}), 13, 'Unauthorized');
    assert.match(err.message, /requires authentication/);
    await expectServerError(app.command({ dropUser: 'temp' }), 11, 'UserNotFound');
    await assert.rejects(connect({ user: 'temp', pwd: 'new-pw', authSource: 'app' }), (e) => e.code === 18);
  });

  test('grantRolesToUser and revokeRolesFromUser change what a connection may do', async () => {
    const app = root.db('app');
    await app.command({ createUser: 'g', pwd: 'g-pw', roles: ['read'] });
    const g = await connect({ user: 'g', pwd: 'g-pw', authSource: 'app' });
    await expectServerError(g.db('app').collection('g').insertOne({ _id: 1 }), 13);
    await app.command({ grantRolesToUser: 'g', roles: ['readWrite'] });
    await g.db('app').collection('g').insertOne({ _id: 1 });
    await app.command({ revokeRolesFromUser: 'g', roles: [{ role: 'readWrite', db: 'app' }] });
    await expectServerError(g.db('app').collection('g').insertOne({ _id: 2 }), 13);
    const info = await app.command({ usersInfo: 'g' });
    assert.deepEqual(info.users[0].roles, [{ role: 'read', db: 'app' }]);
    await expectServerError(app.command({ grantRolesToUser: 'g', roles: ['nosuchrole'] }), 31, 'RoleNotFound');
    await expectServerError(app.command({ grantRolesToUser: 'ghost', roles: ['read'] }), 11, 'UserNotFound');
    await app.command({ dropUser: 'g' });
  });
});

// --- The SASL conversation by hand (what drivers do under the hood) ------------------------

/** The bytes of a BinData payload (a BSON Binary may hold spare capacity past `position`). */
function bytes(b) {
  if (b && b.buffer && typeof b.position === 'number') return Buffer.from(b.buffer.subarray(0, b.position));
  return Buffer.from(b);
}

function scramSha256Client(user, pwd) {
  const nonce = crypto.randomBytes(18).toString('base64');
  const bare = `n=${user},r=${nonce}`;
  const hmac = (key, data) => crypto.createHmac('sha256', key).update(data).digest();
  const state = {};
  return {
    first: Buffer.from(`n,,${bare}`),
    final(serverFirstBuf) {
      const serverFirst = bytes(serverFirstBuf).toString();
      const a = Object.fromEntries(serverFirst.split(',').map((p) => [p[0], p.slice(2)]));
      assert.ok(a.r.startsWith(nonce), `server nonce ${a.r} does not extend ${nonce}`);
      const salted = crypto.pbkdf2Sync(pwd, Buffer.from(a.s, 'base64'), Number(a.i), 32, 'sha256');
      const clientKey = hmac(salted, 'Client Key');
      const storedKey = crypto.createHash('sha256').update(clientKey).digest();
      const withoutProof = `c=biws,r=${a.r}`;
      const authMessage = `${bare},${serverFirst},${withoutProof}`;
      const sig = hmac(storedKey, authMessage);
      const proof = Buffer.from(clientKey.map((b, i) => b ^ sig[i])).toString('base64');
      state.serverSignature = hmac(hmac(salted, 'Server Key'), authMessage).toString('base64');
      return Buffer.from(`${withoutProof},p=${proof}`);
    },
    check(serverFinalBuf) {
      const text = bytes(serverFinalBuf).toString();
      assert.equal(text, `v=${state.serverSignature}`);
    },
  };
}

describe('the SASL conversation', () => {
  test('saslStart / saslContinue without skipEmptyExchange takes the extra empty step', async () => {
    const c = await connect({ options: { maxPoolSize: 1 } });
    const admin = c.db('admin');
    const scram = scramSha256Client('root', 'root-pw');
    const start = await admin.command({ saslStart: 1, mechanism: 'SCRAM-SHA-256', payload: new Binary(scram.first) });
    assert.equal(start.done, false);
    assert.equal(start.conversationId, 1);
    const step2 = await admin.command({
      saslContinue: 1,
      conversationId: start.conversationId,
      payload: new Binary(scram.final(start.payload)),
    });
    assert.equal(step2.done, false);
    scram.check(step2.payload);
    const step3 = await admin.command({ saslContinue: 1, conversationId: 1, payload: new Binary(Buffer.alloc(0)) });
    assert.equal(step3.done, true);
    const status = await admin.command({ connectionStatus: 1 });
    assert.deepEqual(status.authInfo.authenticatedUsers, [{ user: 'root', db: 'admin' }]);
    assert.equal(await c.db('app').collection('c').countDocuments({}), 3);
    await admin.command({ logout: 1 });
    await expectServerError(c.db('app').collection('c').findOne({}), 13);
  });

  test('with skipEmptyExchange the proof step finishes; a wrong proof is 18', async () => {
    const c = await connect({ options: { maxPoolSize: 1 } });
    const admin = c.db('admin');
    const good = scramSha256Client('root', 'root-pw');
    const start = await admin.command({
      saslStart: 1,
      mechanism: 'SCRAM-SHA-256',
      payload: new Binary(good.first),
      options: { skipEmptyExchange: true },
    });
    const fin = await admin.command({ saslContinue: 1, conversationId: 1, payload: new Binary(good.final(start.payload)) });
    assert.equal(fin.done, true);
    good.check(fin.payload);

    const bad = scramSha256Client('root', 'not-root-pw');
    const s2 = await admin.command({ saslStart: 1, mechanism: 'SCRAM-SHA-256', payload: new Binary(bad.first) });
    const err = await expectServerError(
      admin.command({ saslContinue: 1, conversationId: 1, payload: new Binary(bad.final(s2.payload)) }),
      18,
      'AuthenticationFailed',
    );
    assert.equal(err.message, 'Authentication failed.');
    await expectServerError(admin.command({ saslContinue: 1, conversationId: 1, payload: new Binary(Buffer.alloc(0)) }), 17);
    await expectServerError(admin.command({ saslStart: 1, mechanism: 'PLAIN', payload: new Binary(Buffer.from('x')) }), 334);
  });

  test('hello answers speculativeAuthenticate with the server-first message', async () => {
    const c = await connect({ options: { maxPoolSize: 1 } });
    const scram = scramSha256Client('root', 'root-pw');
    const hello = await c.db('admin').command({
      hello: 1,
      speculativeAuthenticate: {
        saslStart: 1,
        mechanism: 'SCRAM-SHA-256',
        payload: new Binary(scram.first),
        options: { skipEmptyExchange: true },
        db: 'admin',
      },
    });
    const sa = hello.speculativeAuthenticate;
    assert.ok(sa, 'no speculativeAuthenticate in the hello reply');
    assert.equal(sa.done, false);
    const done = await c.db('admin').command({
      saslContinue: 1,
      conversationId: sa.conversationId,
      payload: new Binary(scram.final(sa.payload)),
    });
    assert.equal(done.done, true);
    scram.check(done.payload);
    const status = await c.db('admin').command({ connectionStatus: 1 });
    assert.deepEqual(status.authInfo.authenticatedUsers, [{ user: 'root', db: 'admin' }]);
    const unknown = await c.db('admin').command({
      hello: 1,
      speculativeAuthenticate: {
        saslStart: 1,
        mechanism: 'SCRAM-SHA-256',
        payload: new Binary(scramSha256Client('nobody', 'x').first),
        db: 'admin',
      },
    });
    assert.equal(unknown.speculativeAuthenticate, undefined, 'hello must not fail or answer for an unknown user');
  });
});

describe('other clients', () => {
  test('mongosh logs in and runs commands', async () => {
    const uri = `mongodb://root:root-pw@127.0.0.1:${server.port}/?directConnection=true&authSource=admin&serverSelectionTimeoutMS=10000`;
    const out = await mongoshJson(
      uri,
      `const s = db.runCommand({ connectionStatus: 1 });
       print(JSON.stringify({ users: s.authInfo.authenticatedUsers, n: db.getSiblingDB('app').c.countDocuments({}) }))`,
    );
    assert.deepEqual(out.users, [{ user: 'root', db: 'admin' }]);
    assert.equal(out.n, 3);
  });

  test('pymongo logs in with SCRAM-SHA-256 and SCRAM-SHA-1; a wrong password is 18', { timeout: 120_000 }, async () => {
    assert.ok(fs.existsSync(PYTHON), `${PYTHON} not found`);
    const script = `
import json, sys
from pymongo import MongoClient
from pymongo.errors import OperationFailure
port = int(sys.argv[1])
out = {}
for mech in ('SCRAM-SHA-256', 'SCRAM-SHA-1'):
    c = MongoClient('127.0.0.1', port, directConnection=True, username='root', password='root-pw',
                    authSource='admin', authMechanism=mech, serverSelectionTimeoutMS=10000)
    out[mech] = c.app.c.count_documents({})
    c.close()
c = MongoClient('127.0.0.1', port, directConnection=True, username='sha1only', password='sha1-pw',
                serverSelectionTimeoutMS=10000)
out['negotiated'] = c.app.c.count_documents({})
c.close()
try:
    c = MongoClient('127.0.0.1', port, directConnection=True, username='root', password='bad',
                    serverSelectionTimeoutMS=10000)
    c.app.c.find_one()
    out['wrong'] = 'accepted'
except OperationFailure as e:
    out['wrong'] = e.code
print(json.dumps(out))
`;
    const r = await runProgram(PYTHON, ['-c', script, String(server.port)], { timeoutMs: 110_000 });
    assert.equal(r.code, 0, `pymongo failed:\n${r.stdout}\n${r.stderr}`);
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1));
    assert.deepEqual(out, { 'SCRAM-SHA-256': 3, 'SCRAM-SHA-1': 3, negotiated: 3, wrong: 18 });
  });
});

/** The CMake-built libmongoc smoke client ($MONGOC_SMOKE_BIN under ctest), or null. */
function mongocSmoke() {
  if (process.env.MONGOC_SMOKE_BIN) return process.env.MONGOC_SMOKE_BIN;
  for (const preset of ['asan-ubsan', 'debug', 'release']) {
    const p = path.join(__dirname, '..', '..', '..', 'build', preset, 'tests', 'integration', 'mongoc_smoke');
    if (fs.existsSync(p)) return p;
  }
  return null;
}

test('libmongoc logs in (negotiated, SCRAM-SHA-1, SCRAM-SHA-256); a wrong password fails', async (t) => {
  const smoke = mongocSmoke();
  if (!smoke) {
    t.skip('mongoc_smoke is not built (tests/integration/c; clients/mongoc.test.js builds it)');
    return;
  }
  const base = `127.0.0.1:${server.port}/?directConnection=true&authSource=admin`;
  for (const mech of ['', '&authMechanism=SCRAM-SHA-1', '&authMechanism=SCRAM-SHA-256']) {
    const r = await runProgram(smoke, [`mongodb://root:root-pw@${base}${mech}`, '--coll', `auth_smoke${mech.length}`]);
    assert.equal(r.code, 0, `mongoc_smoke${mech} failed:\n${r.stdout}\n${r.stderr}`);
  }
  const bad = await runProgram(smoke, [`mongodb://root:wrong@${base}`]);
  assert.notEqual(bad.code, 0);
  assert.match(`${bad.stdout}${bad.stderr}`, /Authentication failed/);
});

test('security.authorization: enabled in a YAML config turns authentication on', async () => {
  const dir = makeTempDir('halocline-auth-conf-');
  const conf = path.join(dir, 'store.yaml');
  fs.writeFileSync(conf, 'security:\n  authorization: enabled\n');
  const s = await startStore({ extraArgs: ['--config', conf] });
  const c = new MongoClient(s.uri(), CLIENT_DEFAULTS);
  try {
    await c.connect();
    await c.db('admin').command({ createUser: 'root', pwd: 'pw', roles: ['root'] });
    const err = await expectServerError(c.db('app').collection('c').findOne({}), 13);
    assert.equal(err.message, 'Command find requires authentication');
  } finally {
    await c.close();
    await s.cleanup();
  }
});
