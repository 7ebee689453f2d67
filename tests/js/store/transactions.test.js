'use strict';
// Sessions, retryable writes and multi-document transactions on a single-member
// replica set: retry dedupe (also across kill -9), snapshot isolation, write
// conflicts with the TransientTransactionError label, atomic commit, and aborts
// that leave no trace in the data or the oplog.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { inspect } = require('node:util');
const { MongoClient, UUID, Long } = require('mongodb');
const { startStore } = require('../lib/server');
const { RawConnection } = require('../lib/wire');

let server;
let client;
let n = 0;
const collName = () => `tx_${++n}_${process.pid}`;
const connect = async () => {
  const c = new MongoClient(server.uri({ replicaSet: 'rs0', directConnection: 'false' }), { serverSelectionTimeoutMS: 10000 });
  await c.connect();
  return c;
};

before(async () => {
  server = await startStore({ replSet: 'rs0' });
  client = await connect();
});
after(async () => {
  await client.close();
  await server.cleanup();
});

test('a retried write with the same lsid and txnNumber applies once, also after kill -9', async () => {
  // Raw OP_MSG: the driver would substitute its own session for ours.
  const name = collName();
  const lsid = { id: new UUID() };
  let conn = await RawConnection.connect(server.port);
  const run = (doc) => conn.command({ ...doc, $db: 'tx' });
  assert.equal((await run({ insert: name, documents: [{ _id: 1, n: 0 }] })).ok, 1);
  const cmd = { update: name, updates: [{ q: { _id: 1 }, u: { $inc: { n: 1 } } }], lsid, txnNumber: Long.fromNumber(7) };
  assert.equal((await run(cmd)).nModified, 1);
  const again = await run(cmd);
  assert.equal(again.n, 1, 'the retry reports the original outcome');
  assert.equal(again.nModified, 1);
  const found = await run({ find: name, filter: { _id: 1 } });
  assert.equal(found.cursor.firstBatch[0].n, 1, 'applied once');

  const ins = { insert: name, documents: [{ _id: 2 }, { _id: 3 }], lsid, txnNumber: Long.fromNumber(8) };
  assert.equal((await run(ins)).n, 2);
  conn.destroy();
  await client.close(true).catch(() => {});
  await server.kill();
  await server.restart({ samePort: true });
  client = await connect();
  conn = await RawConnection.connect(server.port);
  const retried = await run(ins);
  assert.equal(retried.n, 2, 'the retry after a crash is answered from the durable record');
  assert.equal(retried.writeErrors, undefined, 'no duplicate-key error: the inserts were not re-executed');
  const all = await run({ find: name, filter: {} });
  assert.equal(all.cursor.firstBatch.length, 3);
  const old = await run({ ...cmd, txnNumber: Long.fromNumber(1) });
  assert.equal(old.code, 225, 'an older txnNumber is refused (TransactionTooOld)');
  conn.destroy();
});

test('a retried commitTransaction after kill -9 answers ok for a committed transaction and NoSuchTransaction for a lost one', async () => {
  // The reply to a commit can be lost with the server; the retry must tell the
  // client what happened (mongod keeps this in config.transactions).
  const name = collName();
  let conn = await RawConnection.connect(server.port);
  const run = (doc) => conn.command(doc);
  const committed = { id: new UUID() };
  const open = { id: new UUID() };
  const txn = (lsid, n) => ({ lsid, txnNumber: Long.fromNumber(n), autocommit: false });
  const write = (lsid, id) => run({ insert: name, documents: [{ _id: id }], ...txn(lsid, 5), startTransaction: true, $db: 'tx' });
  const commit = (lsid, n = 5) => run({ commitTransaction: 1, ...txn(lsid, n), $db: 'admin' });
  assert.equal((await write(committed, 'c')).ok, 1);
  assert.equal((await commit(committed)).ok, 1);
  assert.equal((await write(open, 'o')).ok, 1); // never committed
  conn.destroy();
  await client.close(true).catch(() => {});
  await server.kill();
  await server.restart({ samePort: true });
  client = await connect();
  conn = await RawConnection.connect(server.port);
  const retried = await commit(committed);
  assert.equal(retried.ok, 1, `the committed transaction's retried commit answers ok: ${JSON.stringify(retried)}`);
  assert.equal((await commit(committed)).ok, 1, 'and again');
  const lost = await commit(open);
  assert.equal(lost.code, 251, `the lost transaction's commit answers NoSuchTransaction: ${JSON.stringify(lost)}`);
  const other = await commit(committed, 4);
  assert.equal(other.code, 251, 'a commit of another txnNumber of the session is not taken for the committed one');
  const docs = (await run({ find: name, filter: {}, $db: 'tx' })).cursor.firstBatch;
  assert.deepEqual(docs, [{ _id: 'c' }], 'only the committed transaction is in the data');
  // The session continues after the committed transaction; an older one is refused.
  assert.equal((await run({ insert: name, documents: [{ _id: 'd' }], ...txn(committed, 6), startTransaction: true, $db: 'tx' })).ok, 1);
  assert.equal((await commit(committed, 6)).ok, 1);
  const stale = await run({ insert: name, documents: [{ _id: 'e' }], ...txn(committed, 3), startTransaction: true, $db: 'tx' });
  assert.equal(stale.code, 225, 'TransactionTooOld after the restart as before it');
  conn.destroy();
});

test('a committed transaction is atomic and durable; a concurrent reader never sees half of it', async () => {
  const name = collName();
  const coll = client.db('tx').collection(name);
  await coll.insertOne({ _id: 'seed' });
  let stop = false;
  const reader = (async () => {
    let reads = 0;
    while (!stop) {
      const docs = await coll.find({ pair: { $exists: true } }).toArray();
      const byPair = new Map();
      for (const d of docs) byPair.set(d.pair, (byPair.get(d.pair) || 0) + 1);
      for (const [p, count] of byPair) assert.equal(count, 2, `pair ${p} seen half-committed`);
      reads++;
    }
    return reads;
  })();
  for (let p = 0; p < 20; p++) {
    const session = client.startSession();
    await session.withTransaction(async () => {
      await coll.insertOne({ _id: `a${p}`, pair: p }, { session });
      await coll.insertOne({ _id: `b${p}`, pair: p }, { session });
    });
    await session.endSession();
  }
  stop = true;
  assert.ok((await reader) > 0);
  assert.equal(await coll.countDocuments({ pair: { $exists: true } }), 40);
  // One applyOps oplog entry per transaction, carrying the session.
  const entries = await client.db('local').collection('oplog.rs')
    .find({ op: 'c', 'o.applyOps.ns': `tx.${name}` }).toArray();
  assert.equal(entries.length, 20);
  assert.ok(entries.every((e) => e.lsid && e.txnNumber !== undefined && e.o.applyOps.length === 2));
});

test('write conflicts fail with WriteConflict and the TransientTransactionError label', async () => {
  const name = collName();
  const coll = client.db('tx').collection(name);
  await coll.insertOne({ _id: 1, v: 0 });
  const s1 = client.startSession();
  const s2 = client.startSession();
  s1.startTransaction();
  s2.startTransaction();
  await coll.updateOne({ _id: 1 }, { $set: { v: 1 } }, { session: s1 });
  const err = await coll.updateOne({ _id: 1 }, { $set: { v: 2 } }, { session: s2 }).then(() => null, (e) => e);
  assert.ok(err, 'the second writer must conflict');
  assert.equal(err.code, 112);
  assert.ok(err.hasErrorLabel('TransientTransactionError'));
  await s2.abortTransaction().catch(() => {});
  await s1.commitTransaction();
  assert.equal((await coll.findOne({ _id: 1 })).v, 1);
  await s1.endSession();
  await s2.endSession();
});

test('an aborted transaction leaves no trace in the data or the oplog; reads inside see its own writes', async () => {
  const name = collName();
  const coll = client.db('tx').collection(name);
  await coll.insertOne({ _id: 0 });
  const session = client.startSession();
  session.startTransaction();
  await coll.insertOne({ _id: 1 }, { session });
  await coll.updateOne({ _id: 0 }, { $set: { touched: true } }, { session });
  assert.equal(await coll.countDocuments({}, { session }), 2, 'own writes visible inside');
  assert.equal(await coll.countDocuments({}), 1, 'invisible outside before commit');
  await session.abortTransaction();
  await session.endSession();
  assert.deepEqual(await coll.find().toArray(), [{ _id: 0 }]);
  const traces = await client.db('local').collection('oplog.rs')
    .countDocuments({ $or: [{ ns: `tx.${name}`, op: { $in: ['u'] } }, { 'o.applyOps.ns': `tx.${name}` }] });
  assert.equal(traces, 0);
});

test('commands outside a transaction are refused inside one, and unknown transactions are reported', async () => {
  const session = client.startSession();
  session.startTransaction();
  const db = client.db('tx');
  await assert.rejects(db.command({ count: 'x' }, { session }), (e) => e.code === 263);
  await session.endSession();
  const lsid = { id: new UUID() };
  await assert.rejects(
    client.db('admin').command({ commitTransaction: 1, lsid, txnNumber: Long.fromNumber(3), autocommit: false }),
    (e) => e.code === 251,
  );
});

test('a getMore must come from the session and transaction that opened the cursor (50736-50741)', async () => {
  const name = collName();
  const conn = await RawConnection.connect(server.port);
  conn.bsonOptions = { useBigInt64: true };
  try {
    const run = (doc) => conn.command({ ...doc, $db: 'tx' });
    assert.equal((await run({ insert: name, documents: [{ _id: 1 }] })).ok, 1);
    const lsid = { id: new UUID() };
    const other = { id: new UUID() };
    const txn = { lsid, txnNumber: 3n, autocommit: false };
    const open = await run({ insert: name, documents: [{ _id: 2 }, { _id: 3 }, { _id: 4 }], ...txn, startTransaction: true });
    assert.equal(open.ok, 1, inspect(open));
    const found = await run({ find: name, batchSize: 3, sort: { _id: 1 }, ...txn });
    const id = found.cursor.id;
    assert.deepEqual(found.cursor.firstBatch.map((d) => d._id), [1, 2, 3]);
    const refused = async (doc, code) => {
      const r = await run({ getMore: id, collection: name, ...doc });
      assert.equal(r.ok, 0, inspect(r));
      assert.equal(r.code, code, inspect(r));
      assert.match(r.errmsg, /^Cannot run getMore on cursor /);
    };
    await refused({}, 50737);
    await refused({ lsid: other }, 50738);
    await refused({ lsid }, 50740);
    // The refusals left the cursor alone: its own session reads the transaction's snapshot.
    const more = await run({ getMore: id, collection: name, ...txn });
    assert.deepEqual(more.cursor.nextBatch.map((d) => d._id), [4]);
    assert.equal(more.cursor.id, 0n);
    assert.equal((await conn.command({ abortTransaction: 1, ...txn, $db: 'admin' })).ok, 1);
    // A cursor opened outside any session takes no session on getMore.
    const plain = await run({ find: name, batchSize: 0 });
    const r = await run({ getMore: plain.cursor.id, collection: name, lsid: other });
    assert.equal(r.code, 50736, inspect(r));
  } finally {
    conn.destroy();
  }
});

/**
 * Runs `fn(c, coll, waitFor)` against a store with one command thread, where
 * the transaction's connection and a waiting writer's share it: a writer that
 * slept on its thread until the transaction ended would keep commitTransaction
 * (and currentOp) from running until the transaction lifetime limit aborted it.
 * `coll` holds {_id: 1, v: 0, n: 0}; `waitFor(op)` returns once an operation of
 * that kind on `coll` shows in $currentOp.
 */
async function withOneThread(fn) {
  const one = await startStore({ replSet: 'rs0', extraArgs: ['--threads', '1'] });
  const c = new MongoClient(one.uri({ replicaSet: 'rs0', directConnection: 'false' }), { serverSelectionTimeoutMS: 10000 });
  try {
    await c.connect();
    const name = collName();
    const coll = c.db('tx').collection(name);
    await coll.insertOne({ _id: 1, v: 0, n: 0 });
    const waitFor = async (op) => {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const ops = await c.db('admin').aggregate([{ $currentOp: {} }, { $match: { ns: `tx.${name}`, op } }]).toArray();
        if (ops.length > 0) return;
        assert.ok(Date.now() < deadline, `the waiting ${op} never showed in $currentOp`);
        await new Promise((r) => setTimeout(r, 25));
      }
    };
    await fn(c, coll, waitFor);
  } finally {
    await c.close();
    await one.cleanup();
  }
}

test('a write waiting on an open transaction frees its thread: the transaction commits on that thread', { timeout: 30_000 }, () =>
  withOneThread(async (c, coll, waitFor) => {
    const s = c.startSession();
    s.startTransaction();
    await coll.updateOne({ _id: 1 }, { $set: { v: 1 } }, { session: s });
    const waiting = coll.updateOne({ _id: 1 }, { $inc: { n: 1 } });
    await waitFor('update'); // the writer has reached the document and waits on the transaction's write
    await s.commitTransaction();
    await s.endSession();
    const r = await waiting;
    assert.equal(r.modifiedCount, 1);
    // It applied after the transaction, to the committed version.
    assert.deepEqual(await coll.findOne({ _id: 1 }), { _id: 1, v: 1, n: 1 });
  }));

test('a multi-statement write waiting on an open transaction after its first statement committed frees its thread and resumes there', { timeout: 30_000 }, () =>
  // The first statement commits before the second meets the transaction's
  // write: the command cannot start over (that would apply the first twice),
  // and it must not sleep on the thread either.
  withOneThread(async (c, coll, waitFor) => {
    // update: an upsert commits, then the second statement waits.
    let s = c.startSession();
    s.startTransaction();
    await coll.updateOne({ _id: 1 }, { $set: { v: 1 } }, { session: s });
    const updating = coll.bulkWrite(
      [
        { updateOne: { filter: { _id: 0 }, update: { $inc: { n: 1 } }, upsert: true } },
        { updateOne: { filter: { _id: 1 }, update: { $inc: { n: 1 } } } },
      ],
      { ordered: true },
    );
    await waitFor('update');
    await s.commitTransaction();
    await s.endSession();
    const u = await updating;
    assert.equal(u.upsertedCount, 1);
    assert.deepEqual(u.upsertedIds, { 0: 0 });
    assert.equal(u.matchedCount, 1);
    assert.equal(u.modifiedCount, 1);
    assert.deepEqual(await coll.find({ _id: { $in: [0, 1] } }).sort({ _id: 1 }).toArray(), [
      { _id: 0, n: 1 }, // applied once
      { _id: 1, v: 1, n: 1 },
    ]);
    // insert: the second document's _id is the transaction's own insert.
    s = c.startSession();
    s.startTransaction();
    await coll.insertOne({ _id: 5, by: 'txn' }, { session: s });
    const inserting = coll.insertMany([{ _id: 4 }, { _id: 5 }, { _id: 6 }], { ordered: false }).then(
      () => assert.fail('the insert of _id 5 must fail'),
      (e) => e,
    );
    await waitFor('insert');
    await s.commitTransaction();
    await s.endSession();
    const e = await inserting;
    assert.equal(e.result.insertedCount, 2, String(e));
    assert.deepEqual(e.writeErrors.map((w) => [w.index, w.code]), [[1, 11000]]);
    assert.deepEqual(await coll.find({ _id: { $gte: 4 } }).sort({ _id: 1 }).toArray(), [{ _id: 4 }, { _id: 5, by: 'txn' }, { _id: 6 }]);
  }));

test('killSessions, killAllSessions and killAllSessionsByPattern end what the sessions have in flight: transactions, cursors, waiting operations', { timeout: 60_000 }, async () => {
  const name = collName();
  const conns = await Promise.all([0, 1, 2].map(() => RawConnection.connect(server.port)));
  const [a, b, admin] = conns;
  const run = (conn, doc) => conn.command({ ...doc, $db: 'tx' });
  try {
    assert.equal((await run(admin, { insert: name, documents: [{ _id: 1 }, { _id: 2 }, { _id: 3 }] })).ok, 1);
    // Session A: a transaction in progress. Session B: an open cursor.
    const lsidA = { id: new UUID() };
    const lsidB = { id: new UUID() };
    const txn = { lsid: lsidA, txnNumber: Long.fromNumber(1), autocommit: false };
    assert.equal((await run(a, { insert: name, documents: [{ _id: 'uncommitted' }], ...txn, startTransaction: true })).ok, 1);
    const found = await run(b, { find: name, batchSize: 1, lsid: lsidB });
    const cursorId = found.cursor.id;
    // Killing A aborts its transaction and leaves B alone.
    assert.equal((await admin.command({ killSessions: [lsidA], $db: 'admin' })).ok, 1);
    const commit = await a.command({ commitTransaction: 1, ...txn, $db: 'admin' });
    assert.equal(commit.code, 251, inspect(commit));
    assert.equal((await run(admin, { count: name, query: { _id: 'uncommitted' } })).n, 0);
    const more = await run(b, { getMore: cursorId, collection: name, batchSize: 1, lsid: lsidB });
    assert.equal(more.ok, 1, inspect(more));
    // A getMore waiting for data in session C (a change stream's).
    const lsidC = { id: new UUID() };
    const opened = await run(a, { aggregate: name, pipeline: [{ $changeStream: {} }], cursor: {}, lsid: lsidC });
    assert.notEqual(Number(opened.cursor.id), 0, inspect(opened));
    const waiting = run(a, { getMore: opened.cursor.id, collection: name, maxTimeMS: 20_000, lsid: lsidC });
    // Wait until the getMore shows in currentOp, then kill every session.
    for (const deadline = Date.now() + 10_000; ;) {
      const ops = (await admin.command({ currentOp: 1, $db: 'admin' })).inprog;
      if (ops.some((o) => o.command && o.command.getMore !== undefined)) break;
      assert.ok(Date.now() < deadline, 'the waiting getMore never showed in currentOp');
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal((await admin.command({ killAllSessions: [], $db: 'admin' })).ok, 1);
    const ended = await waiting;
    assert.equal(ended.ok, 0, `the waiting getMore was not interrupted: ${inspect(ended)}`);
    // B's cursor is gone too.
    const gone = await run(b, { getMore: cursorId, collection: name, lsid: lsidB });
    assert.equal(gone.code, 43, inspect(gone));
    // Bad arguments.
    assert.equal((await admin.command({ killSessions: 'all', $db: 'admin' })).code, 14);
    assert.equal((await admin.command({ killAllSessions: [1], $db: 'admin' })).code, 14);
    assert.equal((await admin.command({ killSessions: [{}], $db: 'admin' })).code, 40414);
    // killAllSessionsByPattern: by lsid it ends that session's transaction only.
    const lsidD = { id: new UUID() };
    const lsidE = { id: new UUID() };
    const txnD = { lsid: lsidD, txnNumber: Long.fromNumber(1), autocommit: false };
    const txnE = { lsid: lsidE, txnNumber: Long.fromNumber(1), autocommit: false };
    assert.equal((await run(a, { insert: name, documents: [{ _id: 'd' }], ...txnD, startTransaction: true })).ok, 1);
    assert.equal((await run(b, { insert: name, documents: [{ _id: 'e' }], ...txnE, startTransaction: true })).ok, 1);
    assert.equal((await admin.command({ killAllSessionsByPattern: [{ lsid: lsidD }], $db: 'admin' })).ok, 1);
    assert.equal((await a.command({ commitTransaction: 1, ...txnD, $db: 'admin' })).code, 251);
    assert.equal((await b.command({ commitTransaction: 1, ...txnE, $db: 'admin' })).ok, 1);
    assert.equal((await admin.command({ killAllSessionsByPattern: [{ uid: new UUID() }], $db: 'admin' })).code, 115);
    assert.equal((await admin.command({ killAllSessionsByPattern: [{ bogus: 1 }], $db: 'admin' })).code, 40415);
    assert.equal((await admin.command({ killAllSessionsByPattern: [{}], $db: 'admin' })).ok, 1);
  } finally {
    for (const c of conns) c.destroy();
  }
});

test('dropping a collection or an index an open transaction wrote to aborts that transaction; nothing crashes', { timeout: 60_000 }, async () => {
  // Its own store: the test ends by stopping it, which must be clean (WiredTiger
  // used to drop the tables under the transaction's uncommitted writes, and its
  // closing checkpoint crashed).
  const own = await startStore({ replSet: 'rs0' });
  const c = new MongoClient(own.uri({ replicaSet: 'rs0', directConnection: 'false' }), { serverSelectionTimeoutMS: 10000 });
  try {
    await c.connect();
    const db = c.db('tx');
    for (const what of ['collection', 'index']) {
      const coll = db.collection(`${what}_${process.pid}`);
      await coll.insertOne({ _id: 0, k: 0 });
      await coll.createIndex({ k: 1 });
      const s = c.startSession();
      s.startTransaction();
      await coll.insertOne({ _id: 1, k: 1 }, { session: s });
      if (what === 'collection') assert.equal(await coll.drop(), true);
      else await coll.dropIndex('k_1');
      const err = await s.commitTransaction().then(() => null, (e) => e);
      assert.ok(err, `the commit after the ${what} drop must fail`);
      assert.equal(err.code, 251, inspect(err));
      assert.ok(err.hasErrorLabel('TransientTransactionError'));
      await s.endSession();
      assert.equal(await coll.countDocuments({ _id: 1 }), 0, 'the aborted insert is nowhere');
    }
  } finally {
    await c.close();
    await own.stop(); // throws if the store crashed on the way down
    await own.cleanup();
  }
});
