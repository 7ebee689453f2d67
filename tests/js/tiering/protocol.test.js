'use strict';
// Wire-protocol fidelity of the proxy, as real clients see it (issue 13, items 1-5):
// unacknowledged writes (moreToCome) and exhaustAllowed, cursors inside transactions,
// the clock on every reply from the first one on, recoveryToken in transactions, and the
// OP_QUERY commands old drivers still send.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { MongoClient, Long } = require('mongodb');
const W = require('../lib/wire');
const { startTiered, ProxyServer, show } = require('../lib/tiered');
const { expectServerError } = require('../lib/fixture');

let t;

before(async () => {
  t = await startTiered({ collections: ['shop.orders'], horizon: '1h', guard: '1s' });
  await t.waitHealthy();
});
after(async () => {
  if (t) await t.cleanup();
});

async function raw() {
  return W.RawConnection.connect(t.proxy.port);
}

test('the first replies of a freshly started proxy carry operationTime and $clusterTime', async () => {
  // A restart: nothing has been sent to the fast tier for a client yet.
  await t.restartProxy();
  const c = await raw();
  try {
    const hello = await c.command({ hello: 1, $db: 'admin' });
    assert.ok(hello.$clusterTime && hello.$clusterTime.clusterTime, show(hello));
    const ping = await c.command({ ping: 1, $db: 'admin' });
    assert.ok(ping.$clusterTime, show(ping));
    // An untiered collection (the archive answers) and an error reply, too.
    const find = await c.command({ find: 'untiered', filter: {}, $db: 'shop' });
    assert.equal(find.ok, 1, show(find));
    assert.ok(find.operationTime, show(find));
    assert.ok(find.$clusterTime, show(find));
    const bad = await c.command({ noSuchCommand: 1, $db: 'admin' });
    assert.equal(bad.ok, 0, show(bad));
    assert.ok(bad.$clusterTime, show(bad));
  } finally {
    c.destroy();
  }
  // So a causally consistent session sends afterClusterTime on its second read.
  const client = await t.client({ monitorCommands: true });
  const sent = [];
  client.on('commandStarted', (e) => {
    if (e.commandName === 'find') sent.push(e.command);
  });
  const session = client.startSession({ causalConsistency: true });
  try {
    const coll = client.db('shop').collection('untiered');
    await coll.findOne({}, { session });
    await coll.findOne({}, { session });
  } finally {
    await session.endSession();
  }
  assert.equal(sent.length, 2);
  assert.ok(sent[1].readConcern && sent[1].readConcern.afterClusterTime, show(sent[1]));
});

test('an unacknowledged write (moreToCome) gets no reply and the connection goes on serving', async () => {
  const c = await raw();
  try {
    const now = new Date();
    for (const coll of ['orders', 'plain']) {
      const insert = W.opMsg(
        { insert: coll, documents: [{ _id: `w0-${coll}`, date: now }], writeConcern: { w: 0 }, $db: 'shop' },
        { flags: W.MSG_FLAGS.moreToCome },
      );
      await c.send(insert);
      // The next request's reply is the next frame: nothing answered the insert.
      const ping = W.opMsg({ ping: 1, $db: 'admin' });
      await c.send(ping);
      const r = await c.next();
      assert.equal(r.responseTo, ping.readInt32LE(4), `reply to ${coll} insert must not exist`);
      assert.equal(r.doc.ok, 1);
      const found = await c.command({ find: coll, filter: { _id: `w0-${coll}` }, $db: 'shop' });
      assert.equal(found.cursor.firstBatch.length, 1, show(found));
    }
  } finally {
    c.destroy();
  }
  // The Node driver sends w: 0 writes with moreToCome; one pooled connection serves both.
  const client = await t.client({ maxPoolSize: 1 });
  const orders = client.db('shop').collection('orders');
  await orders.insertOne({ _id: 'w0-node', date: new Date() }, { writeConcern: { w: 0 } });
  await orders.updateOne({ _id: 'w0-node' }, { $set: { n: 1 } }, { writeConcern: { w: 0 } });
  await orders.insertOne({ _id: 'w0-node-2', date: new Date() });
  assert.deepEqual(
    (await orders.find({ _id: { $in: ['w0-node', 'w0-node-2'] } }).sort({ _id: 1 }).toArray()).map((d) => [d._id, d.n]),
    [['w0-node', 1], ['w0-node-2', undefined]],
  );
});

test('exhaustAllowed is answered with one reply per request, never a stream', async () => {
  const client = await t.client();
  await client.db('shop').collection('plain_exhaust').insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i })));
  const c = await raw();
  c.bsonOptions = { useBigInt64: true }; // cursor ids stay int64 on the way back
  try {
    const first = await c.command({ find: 'plain_exhaust', filter: {}, batchSize: 2, $db: 'shop' });
    const id = first.cursor.id;
    assert.equal(typeof id, 'bigint');
    assert.notEqual(id, 0n);
    const more = W.opMsg({ getMore: id, collection: 'plain_exhaust', batchSize: 2, $db: 'shop' }, { flags: W.MSG_FLAGS.exhaustAllowed });
    await c.send(more);
    const r = await c.next();
    assert.equal(r.responseTo, more.readInt32LE(4));
    assert.equal(r.flags & W.MSG_FLAGS.moreToCome, 0, 'the proxy never streams');
    assert.equal(r.doc.cursor.nextBatch.length, 2, show(r.doc));
    // Nothing else arrives unasked: the next reply answers the next request.
    const ping = await c.command({ ping: 1, $db: 'admin' });
    assert.equal(ping.ok, 1);
  } finally {
    c.destroy();
  }
});

test('a cursor inside a transaction returns every document through getMore', async () => {
  const client = await t.client();
  const coll = client.db('shop').collection('ledger');
  await coll.insertOne({ _id: 0 });
  const session = client.startSession();
  try {
    let found, aggregated;
    await session.withTransaction(async () => {
      await coll.insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3 }], { session });
      found = await coll.find({}, { session, batchSize: 3 }).sort({ _id: 1 }).toArray();
      aggregated = await coll.aggregate([{ $sort: { _id: 1 } }], { session, batchSize: 3 }).toArray();
    });
    assert.deepEqual(found.map((d) => d._id), [0, 1, 2, 3]);
    assert.deepEqual(aggregated.map((d) => d._id), [0, 1, 2, 3]);
  } finally {
    await session.endSession();
  }
  // A getMore from another session (or none) is refused as mongod refuses it.
  const other = client.startSession();
  const s2 = client.startSession();
  try {
    s2.startTransaction();
    const r = await client.db('shop').command({ find: 'ledger', batchSize: 1 }, { session: s2 });
    await expectServerError(
      client.db('shop').command({ getMore: Long.fromValue(r.cursor.id), collection: 'ledger' }, { session: other }),
      50738,
    );
    await s2.abortTransaction();
  } finally {
    await other.endSession();
    await s2.endSession();
  }
});

test('transaction replies carry a recoveryToken, and a commit through another proxy succeeds', async () => {
  const client = await t.client({ monitorCommands: true });
  const replies = [];
  const commits = [];
  client.on('commandSucceeded', (e) => {
    if (e.commandName === 'insert') replies.push(e.reply);
  });
  client.on('commandStarted', (e) => {
    if (e.commandName === 'commitTransaction') commits.push(e.command);
  });
  const coll = client.db('shop').collection('txn_plain');
  const session = client.startSession();
  try {
    await session.withTransaction(async () => {
      await coll.insertOne({ _id: 'r1' }, { session });
    });
  } finally {
    await session.endSession();
  }
  assert.ok(replies.length >= 1 && replies[0].recoveryToken, show(replies));
  assert.ok(commits.length >= 1 && commits[0].recoveryToken, show(commits));

  // Statements through this proxy, the commit through a second one (drivers retry a
  // commit on another mongos with the token).
  const second = new ProxyServer({
    bin: t.bin,
    configPath: path.join(t.dir, 'proxy-b.yaml'),
    configFor: (port) => t.configFor(port),
    name: 'halocline proxy B',
  });
  await second.start(0);
  const a = await raw();
  const b = await W.RawConnection.connect(second.port);
  try {
    const lsid = { id: new (require('mongodb').UUID)() };
    const ins = await a.command({
      insert: 'txn_plain', documents: [{ _id: 'r2' }], lsid, txnNumber: 1n, startTransaction: true, autocommit: false, $db: 'shop',
    });
    assert.equal(ins.ok, 1, show(ins));
    assert.ok(ins.recoveryToken, show(ins));
    const commit = await b.command({
      commitTransaction: 1, lsid, txnNumber: 1n, autocommit: false, recoveryToken: ins.recoveryToken, $db: 'admin',
    });
    assert.equal(commit.ok, 1, show(commit));
  } finally {
    a.destroy();
    b.destroy();
    await second.stop();
  }
  assert.equal(await coll.countDocuments({ _id: 'r2' }), 1);
});

test('OP_QUERY: the handshake, buildinfo and _isSelf work as on mongod 6.0+; other commands get 352', async () => {
  const c = await raw();
  try {
    const ask = async (ns, query) => {
      const f = W.opQuery(ns, query);
      await c.send(f);
      const r = await c.next();
      assert.equal(r.opCode, W.OP.REPLY);
      assert.equal(r.responseTo, f.readInt32LE(4));
      return r.doc;
    };
    assert.equal((await ask('admin.$cmd', { isMaster: 1 })).ismaster, true);
    // The Java driver 3.x (YCSB) asks buildinfo right after isMaster.
    const bi = await ask('admin.$cmd', { buildinfo: 1 });
    assert.equal(bi.ok, 1, show(bi));
    assert.match(bi.version, /^\d+\.\d+\.\d+/);
    assert.equal((await ask('admin.$cmd', { buildInfo: 1 })).ok, 1);
    // Wrapped the way old drivers wrap a read preference.
    assert.equal((await ask('admin.$cmd', { $query: { buildinfo: 1 }, $readPreference: { mode: 'primary' } })).ok, 1);
    const self = await ask('admin.$cmd', { _isSelf: 1 });
    assert.equal(self.ok, 1, show(self));
    assert.ok(self.id, show(self));
    for (const q of [{ find: 'orders' }, { insert: 'orders', documents: [{ _id: 'opq' }] }, { ping: 1 }]) {
      const r = await ask('shop.$cmd', q);
      assert.equal(r.ok, 0, show(r));
      assert.equal(r.code, 352, show(r));
      assert.match(r.errmsg, new RegExp(`^Unsupported OP_QUERY command: ${Object.keys(q)[0]}\\.`));
    }
    // The connection is still good for OP_MSG afterwards.
    assert.equal((await c.command({ ping: 1, $db: 'admin' })).ok, 1);
  } finally {
    c.destroy();
  }
  const client = await t.client();
  assert.equal(await client.db('shop').collection('orders').countDocuments({ _id: 'opq' }), 0);
});

test('a find whose documents fill 16 MB batches passes through whole: untiered and tiered collections', async () => {
  const client = await t.client();
  const pad = 'b'.repeat(1_000_000);
  for (const name of ['untiered_big', 'orders']) {
    const coll = client.db('shop').collection(name);
    const docs = Array.from({ length: 35 }, (_, i) => ({ _id: `big-${i}`, date: new Date(), pad }));
    for (let i = 0; i < docs.length; i += 5) await coll.insertMany(docs.slice(i, i + 5));
    const got = await coll.find({ _id: { $regex: /^big-/ } }).sort({ _id: 1 }).toArray();
    assert.deepEqual(got.map((d) => d._id), docs.map((d) => d._id).sort(), name);
    assert.ok(got.every((d) => d.pad === pad), name);
    await coll.deleteMany({ _id: { $regex: /^big-/ } });
  }
});
