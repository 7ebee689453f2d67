'use strict';
// Privileges and user-defined roles in the store (`halocline store --auth`), as mongod 7.0
// has them: a role granting find on one collection reads that collection only; role changes
// reach connected users on their next command; rolesInfo and usersInfo (showPrivileges,
// showCredentials) in mongod's reply shapes; the credentials usersInfo shows are those SCRAM
// logs in with; viewUser/viewRole govern who may see them; cursors belong to the user that
// opened them (getMore and killCursors by another user: 13); mongod's error codes; and
// mongosh's role helpers (db.createRole, db.getRoles, db.getUser(..., {showPrivileges})).

const { test, before, after, describe } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { MongoClient, Long } = require('mongodb');
const { startStore } = require('../lib/server');
const { expectServerError, CLIENT_DEFAULTS } = require('../lib/fixture');
const { mongoshJson } = require('../lib/mongosh');

const READ_ACTIONS = [
  'changeStream',
  'collStats',
  'dbHash',
  'dbStats',
  'find',
  'killCursors',
  'listCollections',
  'listIndexes',
  'listSearchIndexes',
  'planCacheRead',
];

let server;
const clients = [];
let root;

/** A connected client; `user`/`pwd` log in (authSource admin unless given). */
async function connect({ user, pwd, authSource = 'admin', mechanism } = {}) {
  const params = mechanism ? { authMechanism: mechanism } : {};
  const c = new MongoClient(server.uri(params), {
    ...CLIENT_DEFAULTS,
    ...(user ? { auth: { username: user, password: pwd }, authSource } : {}),
  });
  clients.push(c);
  await c.connect();
  return c;
}

const orders = (c) => c.db('app').collection('orders');

before(async () => {
  server = await startStore({ replSet: 'rs0', extraArgs: ['--auth'] });
  const bootstrap = await connect();
  await bootstrap.db('admin').command({ createUser: 'root', pwd: 'root-pw', roles: ['root'] });
  root = await connect({ user: 'root', pwd: 'root-pw' });
  await orders(root).insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
  await root.db('app').collection('users').insertOne({ _id: 'u1' });
  await root.db('reports').collection('daily').insertOne({ _id: 'd1' });
});
after(async () => {
  for (const c of clients) await c.close().catch(() => {});
  if (server) await server.cleanup();
});

describe('a user-defined role granting find on one collection', () => {
  let reader;
  before(async () => {
    const app = root.db('app');
    await app.command({
      createRole: 'ordersReader',
      privileges: [{ resource: { db: 'app', collection: 'orders' }, actions: ['find'] }],
      roles: [],
    });
    await app.command({ createUser: 'olga', pwd: 'olga-pw', roles: ['ordersReader'] });
    reader = await connect({ user: 'olga', pwd: 'olga-pw', authSource: 'app' });
  });

  test('reads that collection and nothing else', async () => {
    assert.deepEqual((await orders(reader).find({}).sort({ _id: 1 }).toArray()).map((d) => d._id), [1, 2, 3]);
    assert.equal(await orders(reader).countDocuments({}), 3);
    const err = await expectServerError(reader.db('app').collection('users').findOne({}), 13, 'Unauthorized');
    assert.match(err.message, /^not authorized on app to execute command \{.*"find" ?: ?"users"/);
    await expectServerError(reader.db('reports').collection('daily').findOne({}), 13);
    await expectServerError(orders(reader).insertOne({ _id: 4 }), 13);
    await expectServerError(
      orders(reader).aggregate([{ $lookup: { from: 'users', localField: '_id', foreignField: '_id', as: 'u' } }]).toArray(),
      13,
    );
    await expectServerError(reader.db('app').command({ listCollections: 1 }), 13);
  });

  test('listCollections {authorizedCollections, nameOnly} and listDatabases show only what it may use', async () => {
    const colls = await reader.db('app').listCollections({}, { nameOnly: true, authorizedCollections: true }).toArray();
    assert.deepEqual(colls.map((c) => c.name), ['orders']);
    const dbs = await reader.db('admin').command({ listDatabases: 1, nameOnly: true });
    assert.deepEqual(dbs.databases.map((d) => d.name), ['app']);
  });

  test('a change to the role reaches the connected user on its next command', async () => {
    const app = root.db('app');
    await app.command({
      grantPrivilegesToRole: 'ordersReader',
      privileges: [{ resource: { db: 'app', collection: 'orders' }, actions: ['insert'] }],
    });
    await orders(reader).insertOne({ _id: 4 });
    await app.command({
      revokePrivilegesFromRole: 'ordersReader',
      privileges: [{ resource: { db: 'app', collection: 'orders' }, actions: ['insert'] }],
    });
    await expectServerError(orders(reader).insertOne({ _id: 5 }), 13);
    await app.command({ grantRolesToRole: 'ordersReader', roles: ['read'] });
    assert.equal((await reader.db('app').collection('users').findOne({}))._id, 'u1');
    await app.command({ revokeRolesFromRole: 'ordersReader', roles: [{ role: 'read', db: 'app' }] });
    await expectServerError(reader.db('app').collection('users').findOne({}), 13);
    await orders(root).deleteOne({ _id: 4 });
  });

  test('a direct write to admin.system.users is picked up too; admin.system.roles is not writable', async () => {
    // As on mongod, root may write user documents directly (restore's privileges), not roles.
    const users = root.db('admin').collection('system.users');
    await users.updateOne({ _id: 'app.olga' }, { $set: { roles: [] } });
    await expectServerError(orders(reader).findOne({}), 13);
    await users.updateOne({ _id: 'app.olga' }, { $set: { roles: [{ role: 'ordersReader', db: 'app' }] } });
    assert.equal((await orders(reader).findOne({ _id: 1 }))._id, 1);
    await expectServerError(
      root.db('admin').collection('system.roles').updateOne({ _id: 'app.ordersReader' }, { $set: { privileges: [] } }),
      13,
    );
  });

  test('dropRole takes the role from its users at once', async () => {
    const app = root.db('app');
    await app.command({ createRole: 'temp', privileges: [], roles: ['read'] });
    await app.command({ createUser: 'tess', pwd: 'tess-pw', roles: ['temp'] });
    const t = await connect({ user: 'tess', pwd: 'tess-pw', authSource: 'app' });
    assert.equal((await t.db('app').collection('users').findOne({}))._id, 'u1');
    await app.command({ dropRole: 'temp' });
    await expectServerError(t.db('app').collection('users').findOne({}), 13);
    assert.deepEqual((await app.command({ usersInfo: 'tess' })).users[0].roles, []);
    await expectServerError(app.command({ dropRole: 'temp' }), 31, 'RoleNotFound');
    await app.command({ dropUser: 'tess' });
  });
});

describe('role management errors, as mongod reports them', () => {
  test('unknown roles, duplicates, bad actions, cycles and cross-database grants', async () => {
    const lab = root.db('lab');
    const admin = root.db('admin');
    let err = await expectServerError(lab.command({ createUser: 'x', pwd: 'x', roles: ['nosuchrole'] }), 31, 'RoleNotFound');
    assert.equal(err.message, 'Could not find role: nosuchrole@lab');
    await lab.command({ createRole: 'r1', privileges: [], roles: [] });
    err = await expectServerError(lab.command({ createRole: 'r1', privileges: [], roles: [] }), 51002);
    assert.equal(err.message, 'Role "r1@lab" already exists');
    err = await expectServerError(
      lab.command({
        createRole: 'bad',
        privileges: [{ resource: { db: 'lab', collection: '' }, actions: ['find', 'fakeAction'] }],
        roles: [],
      }),
      2,
      'BadValue',
    );
    assert.equal(err.message, 'Unrecognized action privilege strings: fakeAction');
    err = await expectServerError(lab.command({ createRole: 'r2', privileges: [], roles: ['nope'] }), 31);
    assert.equal(err.message, "Cannot grant roles to 'r2@lab': Could not find role: nope@lab");
    await lab.command({ createRole: 'r2', privileges: [], roles: ['r1'] });
    err = await expectServerError(lab.command({ grantRolesToRole: 'r1', roles: ['r2'] }), 49, 'InvalidRoleModification');
    assert.equal(err.message, 'Granting roles to r1@lab would introduce a cycle in the role graph');
    err = await expectServerError(lab.command({ grantRolesToRole: 'r1', roles: ['r1'] }), 49);
    assert.equal(err.message, 'Cannot grant role r1@lab to itself.');
    err = await expectServerError(
      lab.command({ grantRolesToRole: 'r1', roles: [{ role: 'read', db: 'reports' }] }),
      49,
    );
    assert.equal(err.message, "Roles on the 'lab' database cannot be granted roles from other databases");
    err = await expectServerError(
      lab.command({
        grantPrivilegesToRole: 'r1',
        privileges: [{ resource: { cluster: true }, actions: ['serverStatus'] }],
      }),
      49,
    );
    assert.match(err.message, /cannot be granted privileges that target other databases or the cluster/);
    // admin roles may hold anything.
    await admin.command({
      createRole: 'monitorApp',
      privileges: [{ resource: { cluster: true }, actions: ['serverStatus'] }],
      roles: [{ role: 'r2', db: 'lab' }],
    });
    err = await expectServerError(lab.command({ createRole: 'read', privileges: [], roles: [] }), 2);
    assert.equal(err.message, 'Cannot create roles with the same name as a built-in role');
    err = await expectServerError(lab.command({ grantRolesToRole: 'read', roles: ['r1'] }), 2);
    assert.equal(err.message, 'read@lab is a built-in role and cannot be modified');
    await expectServerError(lab.command({ updateRole: 'r1' }), 2);
    await expectServerError(lab.command({ updateRole: 'ghost', roles: [] }), 31);
    await expectServerError(lab.command({ grantPrivilegesToRole: 'ghost', privileges: [{ resource: { db: 'lab', collection: '' }, actions: ['find'] }] }), 31);
    await expectServerError(lab.command({ createRole: 'nop' }), 40414);
    const dropped = await lab.command({ dropAllRolesFromDatabase: 1 });
    assert.equal(dropped.n, 2);
    const info = await admin.command({ rolesInfo: 'monitorApp' });
    assert.deepEqual(info.roles[0].roles, []);
    await admin.command({ dropRole: 'monitorApp' });
  });
});

describe('rolesInfo and usersInfo in mongod\'s shapes', () => {
  before(async () => {
    const app = root.db('app');
    await app.command({
      createRole: 'ordersWriter',
      privileges: [{ resource: { db: 'app', collection: 'orders' }, actions: ['update', 'insert'] }],
      roles: [],
    });
    await root.db('admin').command({
      createRole: 'auditor',
      privileges: [{ resource: { cluster: true }, actions: ['serverStatus'] }],
      roles: [
        { role: 'ordersWriter', db: 'app' },
        { role: 'read', db: 'reports' },
      ],
    });
    await app.command({ createUser: 'alice', pwd: 'alice-pw', roles: [{ role: 'auditor', db: 'admin' }, 'read'] });
  });

  test('rolesInfo of a user-defined role with showPrivileges', async () => {
    const info = await root.db('admin').command({ rolesInfo: 'auditor', showPrivileges: true });
    assert.equal(info.ok, 1);
    const readPrivs = (db) => [
      { resource: { db, collection: '' }, actions: READ_ACTIONS },
      { resource: { db, collection: 'system.js' }, actions: READ_ACTIONS },
    ];
    assert.deepEqual(info.roles, [
      {
        _id: 'admin.auditor',
        role: 'auditor',
        db: 'admin',
        privileges: [{ resource: { cluster: true }, actions: ['serverStatus'] }],
        roles: [
          { role: 'ordersWriter', db: 'app' },
          { role: 'read', db: 'reports' },
        ],
        inheritedRoles: [
          { role: 'ordersWriter', db: 'app' },
          { role: 'read', db: 'reports' },
        ],
        inheritedPrivileges: [
          { resource: { cluster: true }, actions: ['serverStatus'] },
          ...readPrivs('reports'),
          { resource: { db: 'app', collection: 'orders' }, actions: ['insert', 'update'] },
        ],
        isBuiltin: false,
      },
    ]);
    const brief = await root.db('admin').command({ rolesInfo: { role: 'auditor', db: 'admin' } });
    assert.deepEqual(Object.keys(brief.roles[0]), ['_id', 'role', 'db', 'roles', 'inheritedRoles', 'isBuiltin']);
    const builtin = await root.db('app').command({ rolesInfo: 'read', showPrivileges: true });
    assert.deepEqual(builtin.roles, [
      {
        db: 'app',
        role: 'read',
        roles: [],
        privileges: readPrivs('app'),
        inheritedRoles: [],
        inheritedPrivileges: readPrivs('app'),
        isBuiltin: true,
      },
    ]);
    const all = await root.db('app').command({ rolesInfo: 1, showBuiltinRoles: true });
    assert.deepEqual(all.roles.map((r) => r.role), [
      'dbAdmin',
      'dbOwner',
      'enableSharding',
      'read',
      'readWrite',
      'userAdmin',
      'ordersReader',
      'ordersWriter',
    ]);
    const fragment = await root.db('admin').command({ rolesInfo: ['auditor'], showPrivileges: 'asUserFragment' });
    assert.deepEqual(fragment.userFragment.roles, [{ role: 'auditor', db: 'admin' }]);
    assert.equal(fragment.userFragment.inheritedRoles.length, 3);
    assert.deepEqual((await root.db('app').command({ rolesInfo: 'ghost' })).roles, []);
  });

  test('usersInfo {showCredentials, showPrivileges} as the proxy asks for it, by a viewUser/viewRole role', async () => {
    // The proxy's user: viewUser and viewRole on every database, nothing else.
    await root.db('admin').command({
      createRole: 'authzReader',
      privileges: [{ resource: { db: '', collection: '' }, actions: ['viewUser', 'viewRole'] }],
      roles: [],
    });
    await root.db('admin').command({ createUser: 'proxy', pwd: 'proxy-pw', roles: ['authzReader'] });
    const proxy = await connect({ user: 'proxy', pwd: 'proxy-pw' });
    await expectServerError(orders(proxy).findOne({}), 13);
    const reply = await proxy.db('app').command({
      usersInfo: { user: 'alice', db: 'app' },
      showCredentials: true,
      showPrivileges: true,
    });
    assert.equal(reply.users.length, 1);
    const u = reply.users[0];
    assert.deepEqual(Object.keys(u), [
      '_id',
      'userId',
      'user',
      'db',
      'mechanisms',
      'credentials',
      'roles',
      'inheritedRoles',
      'inheritedPrivileges',
      'inheritedAuthenticationRestrictions',
    ]);
    assert.equal(u._id, 'app.alice');
    assert.equal(u.userId.sub_type, 4);
    assert.deepEqual(u.mechanisms, ['SCRAM-SHA-1', 'SCRAM-SHA-256']);
    assert.deepEqual(u.roles, [
      { role: 'auditor', db: 'admin' },
      { role: 'read', db: 'app' },
    ]);
    assert.deepEqual(u.inheritedRoles, [
      { role: 'auditor', db: 'admin' },
      { role: 'ordersWriter', db: 'app' },
      { role: 'read', db: 'app' },
      { role: 'read', db: 'reports' },
    ]);
    assert.deepEqual(u.inheritedAuthenticationRestrictions, []);
    const byResource = Object.fromEntries(u.inheritedPrivileges.map((p) => [JSON.stringify(p.resource), p.actions]));
    assert.deepEqual(byResource[JSON.stringify({ db: 'app', collection: '' })], READ_ACTIONS);
    assert.deepEqual(byResource[JSON.stringify({ db: 'reports', collection: '' })], READ_ACTIONS);
    assert.deepEqual(byResource[JSON.stringify({ db: 'app', collection: 'orders' })], ['insert', 'update']);
    assert.deepEqual(byResource[JSON.stringify({ cluster: true })], ['serverStatus']);
    assert.equal(u.inheritedPrivileges.length, 6);

    // The stored keys are the ones SCRAM logs in with: derive them from the password.
    const sha256 = u.credentials['SCRAM-SHA-256'];
    const sha1 = u.credentials['SCRAM-SHA-1'];
    assert.deepEqual(Object.keys(sha256), ['iterationCount', 'salt', 'storedKey', 'serverKey']);
    assert.equal(sha256.iterationCount, 15000);
    assert.equal(sha1.iterationCount, 10000);
    const keys = (hash, password, c) => {
      const salted = crypto.pbkdf2Sync(password, Buffer.from(c.salt, 'base64'), c.iterationCount, hash === 'sha1' ? 20 : 32, hash);
      const hmac = (k, s) => crypto.createHmac(hash, k).update(s).digest();
      return {
        storedKey: crypto.createHash(hash).update(hmac(salted, 'Client Key')).digest('base64'),
        serverKey: hmac(salted, 'Server Key').toString('base64'),
      };
    };
    assert.deepEqual(keys('sha256', 'alice-pw', sha256), { storedKey: sha256.storedKey, serverKey: sha256.serverKey });
    const digest = crypto.createHash('md5').update('alice:mongo:alice-pw').digest('hex');
    assert.deepEqual(keys('sha1', digest, sha1), { storedKey: sha1.storedKey, serverKey: sha1.serverKey });
    for (const mechanism of ['SCRAM-SHA-256', 'SCRAM-SHA-1']) {
      const a = await connect({ user: 'alice', pwd: 'alice-pw', authSource: 'app', mechanism });
      assert.equal((await a.db('reports').collection('daily').findOne({}))._id, 'd1', mechanism);
    }

    // rolesInfo with viewRole; the role may be on any database.
    const r = await proxy.db('app').command({ rolesInfo: 'ordersWriter', showPrivileges: true });
    assert.equal(r.roles[0].role, 'ordersWriter');
    // Exact names only with showPrivileges, as mongod.
    await expectServerError(proxy.db('app').command({ usersInfo: 1, showPrivileges: true }), 20, 'IllegalOperation');
  });

  test('viewUser governs usersInfo; a user may always view itself and the roles it holds', async () => {
    const alice = await connect({ user: 'alice', pwd: 'alice-pw', authSource: 'app' });
    const self = await alice.db('app').command({ usersInfo: 'alice', showPrivileges: true });
    assert.equal(self.users[0].user, 'alice');
    assert.equal(self.users[0].credentials, undefined);
    await expectServerError(alice.db('app').command({ usersInfo: 'olga' }), 13);
    await expectServerError(alice.db('app').command({ usersInfo: 1 }), 13);
    await expectServerError(alice.db('admin').command({ usersInfo: { forAllDBs: true } }), 13);
    assert.equal((await alice.db('admin').command({ rolesInfo: 'auditor' })).roles.length, 1);
    await expectServerError(alice.db('admin').command({ rolesInfo: 'authzReader' }), 13);
    const status = await alice.db('admin').command({ connectionStatus: 1, showPrivileges: true });
    assert.equal(status.authInfo.authenticatedUserPrivileges.length, 6);
  });
});

describe('cursors belong to the user that opened them', () => {
  let a;
  let b;
  let cursorId;
  before(async () => {
    const app = root.db('app');
    await app.command({ createUser: 'ann', pwd: 'ann-pw', roles: ['read'] });
    await app.command({ createUser: 'bob', pwd: 'bob-pw', roles: ['read'] });
    await root.db('admin').command({ createUser: 'ops', pwd: 'ops-pw', roles: ['hostManager'] });
    a = await connect({ user: 'ann', pwd: 'ann-pw', authSource: 'app' });
    b = await connect({ user: 'bob', pwd: 'bob-pw', authSource: 'app' });
  });

  async function openCursor() {
    const res = await a.db('app').command({ find: 'orders', batchSize: 1 });
    assert.ok(!res.cursor.id.isZero());
    return res.cursor.id;
  }

  test('getMore and killCursors by another user: 13, with mongod\'s messages', async () => {
    cursorId = await openCursor();
    let err = await expectServerError(b.db('app').command({ getMore: cursorId, collection: 'orders' }), 13, 'Unauthorized');
    assert.equal(err.message, `cursor id ${cursorId} was not created by the authenticated user`);
    err = await expectServerError(b.db('app').command({ killCursors: 'orders', cursors: [cursorId] }), 13);
    assert.equal(err.message, 'not authorized to kill cursor on app.orders');
    // The owner continues it.
    const more = await a.db('app').command({ getMore: cursorId, collection: 'orders', batchSize: 1 });
    assert.equal(more.cursor.nextBatch.length, 1);
    // An unknown cursor is no authorization matter.
    const unknown = await b.db('app').command({ killCursors: 'orders', cursors: [Long.fromNumber(12345)] });
    assert.equal(unknown.cursorsNotFound.length, 1);
    const killed = await a.db('app').command({ killCursors: 'orders', cursors: [cursorId] });
    assert.equal(killed.cursorsKilled.length, 1);
  });

  test('killAnyCursor (hostManager) kills any cursor', async () => {
    cursorId = await openCursor();
    const ops = await connect({ user: 'ops', pwd: 'ops-pw' });
    const killed = await ops.db('app').command({ killCursors: 'orders', cursors: [cursorId] });
    assert.equal(killed.cursorsKilled.length, 1);
  });

  test('the owner loses its cursor with the privileges the cursor needed', async () => {
    cursorId = await openCursor();
    await root.db('app').command({ revokeRolesFromUser: 'ann', roles: ['read'] });
    const err = await expectServerError(a.db('app').command({ getMore: cursorId, collection: 'orders' }), 13);
    assert.equal(err.message, `not authorized for getMore with cursor id ${cursorId}`);
    await root.db('app').command({ grantRolesToUser: 'ann', roles: ['read'] });
    const more = await a.db('app').command({ getMore: cursorId, collection: 'orders' });
    assert.equal(more.cursor.nextBatch.length, 2);
  });
});

test('mongosh: db.createRole, db.getRoles and db.getUser with showPrivileges', async () => {
  const uri = `mongodb://root:root-pw@127.0.0.1:${server.port}/?directConnection=true&authSource=admin&serverSelectionTimeoutMS=10000`;
  const out = await mongoshJson(
    uri,
    `const app = db.getSiblingDB('shop');
     app.createRole({ role: 'shReader', privileges: [{ resource: { db: 'shop', collection: 'items' }, actions: ['find'] }], roles: ['read'] });
     app.createUser({ user: 'sam', pwd: 'sam-pw', roles: ['shReader'] });
     const roles = app.getRoles({ showPrivileges: true }); // the whole rolesInfo reply
     const role = app.getRole('shReader', { showPrivileges: true });
     const user = app.getUser('sam', { showPrivileges: true });
     print(JSON.stringify({ roles: roles.roles.map((r) => r.role), role, inherited: user.inheritedRoles, privs: user.inheritedPrivileges.length }));`,
  );
  assert.deepEqual(out.roles, ['shReader']);
  assert.deepEqual(out.role.privileges, [{ resource: { db: 'shop', collection: 'items' }, actions: ['find'] }]);
  assert.deepEqual(out.role.inheritedRoles, [{ role: 'read', db: 'shop' }]);
  assert.equal(out.role.isBuiltin, false);
  assert.deepEqual(out.inherited, [
    { role: 'read', db: 'shop' },
    { role: 'shReader', db: 'shop' },
  ]);
  assert.equal(out.privs, 3);
});
