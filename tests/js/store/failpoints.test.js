'use strict';
// The test-only configureFailPoint command and mongod's failCommand fail point,
// with the real Node driver: each option behaves as on mongod (errorCode and the
// reply shape, errorLabels replacing the labels the server adds, {times}/{skip}
// counting and the count in the reply, closeConnection seen as a network error,
// blockConnection delaying only that command without holding a command thread,
// appName / namespace filters, writeConcernError, internal clients spared, off),
// and the command exists only with --setParameter enableTestCommands=1.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { MongoClient, MongoNetworkError, MongoWriteConcernError, Long, UUID } = require('mongodb');
const { useStore, expectServerError, CLIENT_DEFAULTS } = require('../lib/fixture');
const { startStore, makeTempDir } = require('../lib/server');
const W = require('../lib/wire');

// One command thread: a blocked command must not hold it (the other connections
// of the test still get answers while it waits).
const ctx = useStore({
  dbName: 'fp_test',
  storeOptions: { replSet: 'rs0', extraArgs: ['--setParameter', 'enableTestCommands=1', '--threads', '1'] },
  clientOptions: { retryReads: false, retryWrites: false },
});

const FAIL_MSG = "Failing command via 'failCommand' failpoint";

function admin() {
  return ctx.client.db('admin');
}

/** configureFailPoint failCommand; returns the reply's count. */
async function failCommand(mode, data) {
  const r = await admin().command({ configureFailPoint: 'failCommand', mode, data });
  assert.equal(r.ok, 1);
  return r.count;
}

async function off() {
  return failCommand('off', {});
}

/** A find sent as a plain command: no driver retry, the server's reply as is. */
function find(db, coll) {
  return db.command({ find: coll, filter: {} });
}

test('errorCode fails only the named commands, with mongod\'s reply shape', async (t) => {
  t.after(off);
  const coll = ctx.collName('code');
  await ctx.db.collection(coll).insertOne({ _id: 1 });
  await failCommand('alwaysOn', { failCommands: ['find'], errorCode: 2 });
  const err = await expectServerError(find(ctx.db, coll), 2, 'BadValue');
  assert.equal(err.errmsg, FAIL_MSG);
  assert.equal(err.errorResponse.ok, 0);
  // Other commands run; ping is not special-cased (it is not named).
  assert.equal((await ctx.db.command({ count: coll })).n, 1);
  assert.equal((await admin().command({ ping: 1 })).ok, 1);
  // A code mongod has no name for is Location<code>.
  await failCommand('alwaysOn', { failCommands: ['find'], errorCode: 12345 });
  await expectServerError(find(ctx.db, coll), 12345, 'Location12345');
  await off();
  assert.equal((await find(ctx.db, coll)).cursor.firstBatch.length, 1);
});

test('{times} and {skip} count only the commands the fail point is about; count reports them', async (t) => {
  t.after(off);
  const coll = ctx.collName('times');
  const before = await failCommand({ times: 2 }, { failCommands: ['find'], errorCode: 11601 });
  await ctx.db.collection(coll).insertOne({ _id: 1 }); // not named: not counted
  await expectServerError(find(ctx.db, coll), 11601, 'Interrupted');
  await expectServerError(find(ctx.db, coll), 11601, 'Interrupted');
  assert.equal((await find(ctx.db, coll)).ok, 1, 'the third find runs');
  // The reply of the next configureFailPoint counts every activation so far.
  assert.equal(await failCommand({ skip: 2 }, { failCommands: ['find'], errorCode: 11601 }), before + 2);
  assert.equal((await find(ctx.db, coll)).ok, 1, 'skipped');
  assert.equal((await find(ctx.db, coll)).ok, 1, 'skipped');
  await expectServerError(find(ctx.db, coll), 11601);
  await expectServerError(find(ctx.db, coll), 11601);
  assert.equal(await off(), before + 4);
  assert.equal((await find(ctx.db, coll)).ok, 1, 'off');
});

test('closeConnection closes the connection without a reply: the driver sees a network error', async (t) => {
  t.after(off);
  const coll = ctx.collName('close');
  await failCommand({ times: 1 }, { failCommands: ['find'], closeConnection: true });
  let err = null;
  try {
    await find(ctx.db, coll);
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof MongoNetworkError, `expected a network error, got ${err && err.name}: ${err && err.message}`);
  // The driver reconnects; the fail point has run out.
  assert.equal((await find(ctx.db, coll)).ok, 1);
});

test('blockConnection delays only that command; other connections are served meanwhile', async (t) => {
  t.after(off);
  const other = await ctx.newClient({ appName: 'bystander' });
  await other.db('admin').command({ ping: 1 }); // connected before the block starts
  const blockMs = 1500;
  await failCommand({ times: 1 }, { failCommands: ['ping'], blockConnection: true, blockTimeMS: blockMs, appName: 'blocked' });
  const blocked = await ctx.newClient({ appName: 'blocked' });
  const order = [];
  const started = Date.now();
  const slow = blocked
    .db('admin')
    .command({ ping: 1 })
    .then(() => order.push('blocked'));
  // The waiting command shows in currentOp; meanwhile the store's only command
  // thread answers the bystander.
  await waitForCurrentOp((op) => op.command && op.command.ping && appNameOf(op) === 'blocked');
  await other.db('admin').command({ ping: 1 });
  order.push('bystander');
  await slow;
  const took = Date.now() - started;
  assert.deepEqual(order, ['bystander', 'blocked']);
  assert.ok(took >= blockMs, `the blocked ping answered after ${took} ms`);
  // blockConnection without blockTimeMS is refused as mongod does.
  await failCommand({ times: 1 }, { failCommands: ['ping'], blockConnection: true, appName: 'blocked' });
  await expectServerError(blocked.db('admin').command({ ping: 1 }), 72, 'InvalidOptions');
});

function appNameOf(op) {
  return op.clientMetadata && op.clientMetadata.application && op.clientMetadata.application.name;
}

/** Polls $currentOp until an operation satisfies `pred` (bounded). */
async function waitForCurrentOp(pred) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const ops = await admin().aggregate([{ $currentOp: { allUsers: true } }]).toArray();
    if (ops.some(pred)) return;
    if (Date.now() > deadline) throw new Error(`no such operation in currentOp: ${JSON.stringify(ops)}`);
  }
}

test('appName limits the fail point to connections whose handshake named that application', async (t) => {
  t.after(off);
  const coll = ctx.collName('app');
  const mine = await ctx.newClient({ appName: 'fp-app' }, { retryReads: false });
  const theirs = await ctx.newClient({ appName: 'other-app' }, { retryReads: false });
  await failCommand('alwaysOn', { failCommands: ['find'], errorCode: 2, appName: 'fp-app' });
  await expectServerError(find(mine.db('fp_test'), coll), 2, 'BadValue');
  assert.equal((await find(theirs.db('fp_test'), coll)).ok, 1);
  assert.equal((await find(ctx.db, coll)).ok, 1, 'no appName at all');
});

test('namespace limits the fail point to commands on that collection', async (t) => {
  t.after(off);
  const a = ctx.collName('nsA');
  const b = ctx.collName('nsB');
  await failCommand('alwaysOn', { failCommands: ['find'], errorCode: 2, namespace: `fp_test.${a}` });
  await expectServerError(find(ctx.db, a), 2);
  assert.equal((await find(ctx.db, b)).ok, 1);
});

test('writeConcernError goes into the reply of a write that is applied', async (t) => {
  t.after(off);
  const coll = ctx.coll('wce');
  const wce = { code: 100, codeName: 'UnsatisfiableWriteConcern', errmsg: 'Not enough data-bearing nodes', errInfo: {} };
  await failCommand({ times: 1 }, { failCommands: ['insert', 'find'], writeConcernError: wce });
  assert.equal((await find(ctx.db, coll.collectionName)).writeConcernError, undefined, 'a read takes no write concern');
  let err = null;
  try {
    await coll.insertOne({ _id: 1 });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof MongoWriteConcernError, `expected a write concern error, got ${err && err.name}`);
  assert.equal(err.code, 100);
  assert.deepEqual(await coll.find().toArray(), [{ _id: 1 }], 'the write itself happened');
  assert.equal((await coll.insertOne({ _id: 2 })).acknowledged, true, '{times: 1} is used up');
});

test('labels: RetryableWriteError on a retryable write unless errorLabels replaces them', async (t) => {
  t.after(off);
  const coll = ctx.collName('labels');
  const conn = await W.RawConnection.connect(ctx.server.port);
  t.after(() => conn.destroy());
  const lsid = { id: new UUID() };
  let txn = 0;
  const insert = (extra = {}) =>
    conn.command({ insert: coll, documents: [{ x: 1 }], $db: 'fp_test', lsid, txnNumber: Long.fromNumber(++txn), ...extra });

  await failCommand('alwaysOn', { failCommands: ['insert'], errorCode: 91 });
  let r = await insert();
  assert.equal(r.ok, 0);
  assert.equal(r.code, 91);
  assert.equal(r.codeName, 'ShutdownInProgress');
  assert.equal(r.errmsg, FAIL_MSG);
  assert.deepEqual(r.errorLabels, ['RetryableWriteError']);
  // Not a retryable write (no txnNumber): no label.
  r = await conn.command({ insert: coll, documents: [{ x: 1 }], $db: 'fp_test' });
  assert.equal(r.code, 91);
  assert.equal(r.errorLabels, undefined);
  // errorLabels replaces the server's labels; an empty list removes them.
  await failCommand('alwaysOn', { failCommands: ['insert'], errorCode: 91, errorLabels: [] });
  r = await insert();
  assert.equal(r.code, 91);
  assert.equal(r.errorLabels, undefined);
  await failCommand('alwaysOn', { failCommands: ['insert'], errorCode: 11000, errorLabels: ['Custom'] });
  r = await insert();
  assert.equal(r.code, 11000);
  assert.deepEqual(r.errorLabels, ['Custom']);
  // A not-primary error carries the topologyVersion hello reports, as on a replica set member.
  await failCommand('alwaysOn', { failCommands: ['insert'], errorCode: 10107 });
  r = await insert();
  assert.equal(r.codeName, 'NotWritablePrimary');
  assert.deepEqual(r.errorLabels, ['RetryableWriteError']);
  const hello = await conn.command({ hello: 1, $db: 'admin' });
  assert.deepEqual(r.topologyVersion, hello.topologyVersion);
  // Inside a transaction a transient error is a TransientTransactionError.
  await failCommand('alwaysOn', { failCommands: ['insert'], errorCode: 112 });
  r = await insert({ startTransaction: true, autocommit: false });
  assert.equal(r.codeName, 'WriteConflict');
  assert.deepEqual(r.errorLabels, ['TransientTransactionError']);
});

test('internal clients are spared unless failInternalCommands', async (t) => {
  t.after(off);
  const coll = ctx.collName('internal');
  const conn = await W.RawConnection.connect(ctx.server.port);
  t.after(() => conn.destroy());
  const hello = await conn.command({ hello: 1, internalClient: { minWireVersion: 0, maxWireVersion: 21 }, $db: 'admin' });
  assert.equal(hello.ok, 1);
  await failCommand('alwaysOn', { failCommands: ['find'], errorCode: 2 });
  assert.equal((await conn.command({ find: coll, $db: 'fp_test' })).ok, 1, 'an internal client is not failed');
  await expectServerError(find(ctx.db, coll), 2);
  await failCommand('alwaysOn', { failCommands: ['find'], errorCode: 2, failInternalCommands: true });
  assert.equal((await conn.command({ find: coll, $db: 'fp_test' })).code, 2);
});

test('off turns it off; configureFailPoint itself is never failed; bad input gets mongod\'s errors', async (t) => {
  t.after(off);
  await failCommand('alwaysOn', { failCommands: ['configureFailPoint', 'count'], errorCode: 2 });
  await expectServerError(ctx.db.command({ count: 'x' }), 2);
  await off(); // configureFailPoint still runs
  assert.equal((await ctx.db.command({ count: 'x' })).ok, 1);
  await expectServerError(admin().command({ configureFailPoint: 'noSuchFailPoint', mode: 'off' }), 266, 'FailPointSetFailed');
  await expectServerError(admin().command({ configureFailPoint: 'failCommand', mode: 'sometimes' }), 2, 'BadValue');
  await expectServerError(admin().command({ configureFailPoint: 'failCommand' }), 20, 'IllegalOperation');
  await expectServerError(admin().command({ configureFailPoint: 'failCommand', mode: { times: -1 } }), 2, 'BadValue');
  await expectServerError(ctx.db.command({ configureFailPoint: 'failCommand', mode: 'off' }), 13, 'Unauthorized');
  const p = await admin().command({ getParameter: 1, enableTestCommands: 1 });
  assert.equal(p.enableTestCommands, true);
});

test('without enableTestCommands configureFailPoint is an unknown command (59), as on mongod', async () => {
  const server = await startStore();
  const client = new MongoClient(server.uri(), CLIENT_DEFAULTS);
  try {
    await client.connect();
    const err = await expectServerError(
      client.db('admin').command({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['find'], errorCode: 2 } }),
      59,
      'CommandNotFound',
    );
    assert.equal(err.errmsg, "no such command: 'configureFailPoint'");
    const p = await client.db('admin').command({ getParameter: 1, enableTestCommands: 1 });
    assert.equal(p.enableTestCommands, false);
  } finally {
    await client.close();
    await server.cleanup();
  }
});

test('YAML setParameter: {enableTestCommands: 1} enables it too', async () => {
  const dir = makeTempDir('halocline-fp-conf-');
  const conf = path.join(dir, 'halocline.conf');
  fs.writeFileSync(conf, 'setParameter:\n  enableTestCommands: 1\n');
  const server = await startStore({ extraArgs: ['--config', conf] });
  const client = new MongoClient(server.uri(), CLIENT_DEFAULTS);
  try {
    await client.connect();
    const r = await client.db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
    assert.equal(r.ok, 1);
    assert.equal(r.count, 0);
  } finally {
    await client.close();
    await server.cleanup();
  }
});
