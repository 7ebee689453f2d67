'use strict';
// Store fidelity (issue 14): where the store cannot do what mongod 7.0 does, it
// fails with mongod's error instead of answering differently. DDL inside a
// transaction, write errors inside a transaction, unknown update statement
// fields, '$'-prefixed fields inside _id, write concerns the set cannot satisfy,
// and snapshot reads at one cluster time. Each test fails if the behaviour breaks.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { inspect } = require('node:util');
const { MongoClient, UUID, Long, Timestamp } = require('mongodb');
const { startStore } = require('../lib/server');
const { RawConnection } = require('../lib/wire');

let server;
let client;
let conn;
let n = 0;
const collName = () => `fid_${++n}_${process.pid}`;
const DB = 'fid';
const run = (doc, db = DB) => conn.command({ ...doc, $db: db });

before(async () => {
  server = await startStore({ replSet: 'rs0' });
  client = new MongoClient(server.uri({ replicaSet: 'rs0', directConnection: 'false' }), { serverSelectionTimeoutMS: 10000 });
  await client.connect();
  conn = await RawConnection.connect(server.port);
});
after(async () => {
  conn?.destroy();
  await client?.close();
  await server?.cleanup();
});

/** A raw transaction on a fresh lsid: txn(doc) sends doc inside it (the first starts it). */
function rawTxn() {
  const lsid = { id: new UUID() };
  const txnNumber = Long.fromNumber(1);
  let started = false;
  const send = (doc, db = DB) => {
    const extra = { lsid, txnNumber, autocommit: false };
    if (!started) extra.startTransaction = true;
    started = true;
    return run({ ...doc, ...extra }, db);
  };
  send.commit = () => run({ commitTransaction: 1, lsid, txnNumber, autocommit: false }, 'admin');
  send.abort = () => run({ abortTransaction: 1, lsid, txnNumber, autocommit: false }, 'admin');
  return send;
}

function assertError(reply, code, codeName, errmsg) {
  assert.equal(reply.ok, 0, inspect(reply));
  assert.equal(reply.code, code, inspect(reply));
  assert.equal(reply.codeName, codeName, inspect(reply));
  if (errmsg !== undefined) assert.equal(reply.errmsg, errmsg, inspect(reply));
}

// ------------------------------------------------------------ DDL in transactions

test('collections created inside a transaction (create, createIndexes, a first write) vanish on abort and appear on commit', async () => {
  const listed = async (name) => (await run({ listCollections: 1, filter: { name } })).cursor.firstBatch.length === 1;
  const oplogCreates = async (name) => (await run({
    find: 'oplog.rs',
    filter: { $or: [{ 'o.create': name }, { 'o.applyOps.o.create': name }] },
  }, 'local')).cursor.firstBatch.length;
  const ways = {
    create: (name) => ({ create: name }),
    createIndexes: (name) => ({ createIndexes: name, indexes: [{ key: { a: 1 }, name: 'a_1' }] }),
    insert: (name) => ({ insert: name, documents: [{ _id: 1 }] }),
    upsert: (name) => ({ update: name, updates: [{ q: { _id: 1 }, u: { $set: { a: 1 } }, upsert: true }] }),
  };
  for (const [way, cmd] of Object.entries(ways)) {
    const name = collName();
    let t = rawTxn();
    const r = await t(cmd(name));
    assert.equal(r.ok, 1, `${way}: ${inspect(r)}`);
    assert.equal(r.writeErrors, undefined, `${way}: ${inspect(r)}`);
    assert.equal((await t.abort()).ok, 1);
    assert.equal(await listed(name), false, `${way}: the aborted transaction's collection is gone`);
    assert.equal(await oplogCreates(name), 0, `${way}: an aborted create leaves no oplog entry`);

    t = rawTxn();
    assert.equal((await t(cmd(name))).ok, 1);
    assert.equal(await listed(name), false, `${way}: other clients do not see it before the commit`);
    assert.deepEqual((await run({ find: name })).cursor.firstBatch, [], `${way}: nor read from it`);
    assert.equal((await t({ find: name })).ok, 1, `${way}: the transaction itself uses it`);
    assert.equal((await t.commit()).ok, 1);
    assert.equal(await listed(name), true, `${way}: the committed transaction's collection exists`);
    assert.equal(await oplogCreates(name), 1, `${way}: its create entry committed with the transaction`);
  }

  // A plain insert into a collection another transaction is creating waits for
  // that transaction, then writes into the committed collection.
  {
    const name = collName();
    const t = rawTxn();
    assert.equal((await t({ insert: name, documents: [{ _id: 'txn' }] })).ok, 1);
    const other = await RawConnection.connect(server.port);
    try {
      let settled = false;
      const waiting = other.command({ insert: name, documents: [{ _id: 'plain' }], $db: DB });
      waiting.finally(() => { settled = true; }).catch(() => {});
      for (let i = 0; i < 3; i++) assert.equal((await run({ ping: 1 })).ok, 1);
      assert.equal(settled, false, 'the insert waits for the transaction');
      assert.equal((await t.commit()).ok, 1);
      assert.equal((await waiting).n, 1);
    } finally {
      other.destroy();
    }
    const ids = (await run({ find: name, sort: { _id: 1 } })).cursor.firstBatch.map((d) => d._id);
    assert.deepEqual(ids, ['plain', 'txn']);
  }

  // createIndexes on a collection the transaction created and wrote to: the build
  // could not see the transaction's documents, so it is refused.
  const name = collName();
  const t = rawTxn();
  assert.equal((await t({ insert: name, documents: [{ a: 1 }] })).ok, 1);
  assertError(await t({ createIndexes: name, indexes: [{ key: { a: 1 }, name: 'a_1' }] }), 263,
    'OperationNotSupportedInTransaction',
    `Cannot create new indexes on non-empty collection ${DB}.${name} in a multi-document transaction.`);
  assert.equal(await listed(name), false, 'the refusal aborted the transaction and its collection');

  // Through the driver: abortTransaction undoes an explicit create.
  const other = collName();
  const session = client.startSession();
  session.startTransaction();
  await client.db(DB).createCollection(other, { session });
  await client.db(DB).collection(other).insertOne({ _id: 1 }, { session });
  await session.abortTransaction();
  await session.endSession();
  assert.equal(await listed(other), false);
});

test('createIndexes on an existing collection inside a transaction: new indexes are refused, existing ones are a no-op', async () => {
  const name = collName();
  const ns = `${DB}.${name}`;
  assert.equal((await run({ createIndexes: name, indexes: [{ key: { a: 1 }, name: 'a_1' }] })).ok, 1);
  let t = rawTxn();
  const same = await t({ createIndexes: name, indexes: [{ key: { a: 1 }, name: 'a_1' }] });
  assert.equal(same.ok, 1, inspect(same));
  assert.equal(same.numIndexesBefore, 2);
  assert.equal(same.numIndexesAfter, 2);
  assert.equal(same.note, 'all indexes already exist');
  assert.equal((await t.commit()).ok, 1);

  t = rawTxn();
  assertError(await t({ createIndexes: name, indexes: [{ key: { b: 1 }, name: 'b_1' }] }), 263,
    'OperationNotSupportedInTransaction',
    `Cannot create new indexes on existing collection ${ns} in a multi-document transaction.`);
  const idx = await run({ listIndexes: name });
  assert.deepEqual(idx.cursor.firstBatch.map((i) => i.name).sort(), ['_id_', 'a_1']);
  assertError(await t.commit(), 251, 'NoSuchTransaction');
});

test('drop, dropIndexes, collMod, renameCollection and count are refused inside a transaction with mongod\'s messages', async () => {
  const name = collName();
  assert.equal((await run({ insert: name, documents: [{ _id: 1 }] })).ok, 1);
  for (const [cmd, db] of [
    [{ drop: name }, DB],
    [{ dropIndexes: name, index: '*' }, DB],
    [{ collMod: name }, DB],
    [{ renameCollection: `${DB}.${name}`, to: `${DB}.${name}_x` }, 'admin'],
    [{ dropDatabase: 1 }, DB],
  ]) {
    const t = rawTxn();
    const name0 = Object.keys(cmd)[0];
    assertError(await t(cmd, db), 263, 'OperationNotSupportedInTransaction',
      `Cannot run '${name0}' in a multi-document transaction.`);
  }
  const t = rawTxn();
  assertError(await t({ count: name }), 263, 'OperationNotSupportedInTransaction',
    "Cannot run 'count' in a multi-document transaction. Please see " +
      'http://dochub.mongodb.org/core/transaction-count for a recommended alternative.');
  const found = await run({ find: name });
  assert.deepEqual(found.cursor.firstBatch, [{ _id: 1 }], 'the collection is untouched');
});

// ------------------------------------------------------------ write errors in transactions

test('a write error inside a transaction is the batch\'s only writeError with ok: 1, and aborts the transaction', async () => {
  const name = collName();
  assert.equal((await run({ insert: name, documents: [{ _id: 5 }, { _id: 0, x: 'string' }] })).ok, 1);
  for (const ordered of [true, false]) {
    let t = rawTxn();
    const r = await t({ insert: name, documents: [{ _id: 10 }, { _id: 11 }, { _id: 5 }, { _id: 5 }, { _id: 12 }], ordered });
    assert.equal(r.ok, 1, inspect(r));
    assert.equal(r.n, 2, inspect(r));
    assert.equal(r.writeErrors.length, 1, inspect(r));
    assert.equal(r.writeErrors[0].index, 2);
    assert.equal(r.writeErrors[0].code, 11000);
    assert.match(r.writeErrors[0].errmsg, /^E11000 duplicate key error/);
    assert.equal(r.errorLabels, undefined, 'no TransientTransactionError on a duplicate key');
    // The transaction is aborted: its next statement and its commit fail.
    const next = await t({ find: name });
    assertError(next, 251, 'NoSuchTransaction');
    assert.deepEqual(next.errorLabels, ['TransientTransactionError']);
    assertError(await t.commit(), 251, 'NoSuchTransaction');
    const after = await run({ find: name, filter: { _id: { $gte: 10 } } });
    assert.deepEqual(after.cursor.firstBatch, [], `nothing of the aborted transaction stays (ordered: ${ordered})`);

    t = rawTxn();
    const u = await t({
      update: name,
      updates: [{ q: { _id: 0 }, u: { $set: { x: 'STRING' } } }, { q: { _id: 0 }, u: { $inc: { x: 1 } } }],
      ordered,
    });
    assert.equal(u.ok, 1, inspect(u));
    assert.equal(u.n, 1);
    assert.equal(u.writeErrors.length, 1);
    assert.equal(u.writeErrors[0].index, 1);
    assert.equal(u.writeErrors[0].code, 14);
    assertError(await t.commit(), 251, 'NoSuchTransaction');
    assert.equal((await run({ find: name, filter: { _id: 0 } })).cursor.firstBatch[0].x, 'string');
  }
  // The driver: insertOne's duplicate key is a server error without the transient label.
  const coll = client.db(DB).collection(name);
  const session = client.startSession();
  session.startTransaction();
  await coll.insertOne({ _id: 20 }, { session });
  const dup = await coll.insertOne({ _id: 20 }, { session }).then(() => null, (e) => e);
  assert.ok(dup, 'the duplicate must fail');
  assert.equal(dup.code, 11000);
  assert.ok(!dup.hasErrorLabel('TransientTransactionError'));
  const again = await coll.insertOne({ _id: 21 }, { session }).then(() => null, (e) => e);
  assert.equal(again?.code, 251, 'the transaction was aborted by the write error');
  await session.abortTransaction();
  await session.endSession();
  assert.equal(await coll.countDocuments({ _id: { $in: [20, 21] } }), 0);
});

// ------------------------------------------------------------ update statement fields

test('an update statement with a field mongod 7.0 does not know (sort) fails the command and writes nothing', async () => {
  const name = collName();
  assert.equal((await run({ insert: name, documents: [{ _id: 1, a: 1 }, { _id: 2, a: 2 }] })).ok, 1);
  const r = await run({
    update: name,
    updates: [{ q: {}, u: { $set: { first: true } } }, { q: { a: { $gt: 0 } }, u: { $set: { b: 1 } }, sort: { a: -1 } }],
  });
  assertError(r, 40415, 'Location40415', "BSON field 'update.updates.sort' is an unknown field.");
  const docs = (await run({ find: name, sort: { _id: 1 } })).cursor.firstBatch;
  assert.deepEqual(docs, [{ _id: 1, a: 1 }, { _id: 2, a: 2 }], 'no statement ran');
  assertError(await run({ delete: name, deletes: [{ q: {}, limit: 1, sort: { a: 1 } }] }), 40415, 'Location40415',
    "BSON field 'delete.deletes.sort' is an unknown field.");
  // mongod 7.0's own statement fields are accepted.
  const ok = await run({
    update: name,
    updates: [{ q: { _id: 1 }, u: { $set: { c: 1 } }, multi: false, upsert: false, hint: { _id: 1 }, upsertSupplied: false }],
  });
  assert.equal(ok.ok, 1, inspect(ok));
  assert.equal(ok.nModified, 1);
});

// ------------------------------------------------------------ $-prefixed fields inside _id

test('an _id document holding a $-prefixed field is refused (52) on insert, upsert and replacement; DBRefs pass', async () => {
  const name = collName();
  const ins = await run({ insert: name, documents: [{ _id: { $a: 1 }, x: 1 }] });
  assert.equal(ins.ok, 1);
  assert.equal(ins.n, 0);
  assert.equal(ins.writeErrors[0].code, 52, inspect(ins));
  assert.equal(ins.writeErrors[0].errmsg, "_id fields may not contain '$'-prefixed fields: $a is not valid for storage.");
  const deep = await run({ insert: name, documents: [{ _id: { a: { b: [{ $c: 1 }] } } }] });
  assert.equal(deep.writeErrors?.[0]?.code, 52, inspect(deep));
  assert.equal(deep.writeErrors[0].errmsg, "_id fields may not contain '$'-prefixed fields: $c is not valid for storage.");
  const ref = await run({ insert: name, documents: [{ _id: { $ref: 'c', $id: 1, $db: 'd' } }] });
  assert.equal(ref.n, 1, inspect(ref));
  assert.equal(ref.writeErrors, undefined);

  const replacementMsg = "The dollar ($) prefixed field '$a' in '_id.$a' is not allowed in the context of an " +
    "update's replacement document. Consider using an aggregation pipeline with $replaceWith.";
  const upsert = await run({ update: name, updates: [{ q: { x: 9 }, u: { _id: { $a: 1 }, x: 9 }, upsert: true }] });
  assert.equal(upsert.ok, 1);
  assert.equal(upsert.writeErrors?.[0]?.code, 52, inspect(upsert));
  assert.equal(upsert.writeErrors[0].errmsg, replacementMsg);
  const setId = await run({ update: name, updates: [{ q: { x: 8 }, u: { $set: { _id: { $a: 1 } } }, upsert: true }] });
  assert.equal(setId.writeErrors?.[0]?.code, 52, inspect(setId));
  assert.equal(setId.writeErrors[0].errmsg, replacementMsg);
  const fam = await run({ findAndModify: name, query: { x: 7 }, update: { _id: { $a: 1 }, x: 7 }, upsert: true });
  assertError(fam, 52, 'DollarPrefixedFieldName', replacementMsg);
  const docs = (await run({ find: name })).cursor.firstBatch;
  assert.equal(docs.length, 1, inspect(docs));
});

test('an operator update of a document that already has a top-level $-prefixed field succeeds; a replacement keeping it is refused (52)', async () => {
  const name = collName();
  const ins = await run({ insert: name, documents: [{ _id: 1, $price: 5, v: 1 }, { _id: 2, v: 2 }] });
  assert.equal(ins.n, 2, inspect(ins));
  const up = await run({ update: name, updates: [{ q: {}, u: { $set: { v: 9 } }, multi: true }] });
  assert.equal(up.ok, 1, inspect(up));
  assert.equal(up.nModified, 2, inspect(up));
  assert.equal(up.writeErrors, undefined, inspect(up));
  const rep = await run({ update: name, updates: [{ q: { _id: 1 }, u: { v: 3, $price: 6 } }] });
  assert.equal(rep.writeErrors?.[0]?.code, 52, inspect(rep));
  const docs = (await run({ find: name, sort: { _id: 1 } })).cursor.firstBatch;
  assert.deepEqual(docs, [{ _id: 1, $price: 5, v: 9 }, { _id: 2, v: 9 }]);
});

// ------------------------------------------------------------ write concern

test('a write concern the one-member set cannot satisfy is a writeConcernError after the write, as mongod reports it', async () => {
  const name = collName();
  const r = await run({ insert: name, documents: [{ _id: 1 }], writeConcern: { w: 10 } });
  assert.equal(r.ok, 1, inspect(r));
  assert.equal(r.n, 1, 'the write happened');
  assert.deepEqual(r.writeConcernError, {
    code: 100,
    codeName: 'UnsatisfiableWriteConcern',
    errmsg: 'Not enough data-bearing nodes',
    errInfo: { writeConcern: { w: 10, wtimeout: 0, provenance: 'clientSupplied' } },
  });
  const tag = await run({ update: name, updates: [{ q: { _id: 1 }, u: { $set: { a: 1 } } }], writeConcern: { w: 'foo', wtimeout: 100 } });
  assert.equal(tag.ok, 1, inspect(tag));
  assert.equal(tag.nModified, 1);
  assert.deepEqual(tag.writeConcernError, {
    code: 79,
    codeName: 'UnknownReplWriteConcern',
    errmsg: "No write concern mode named 'foo' found in replica set configuration",
    errInfo: { writeConcern: { w: 'foo', wtimeout: 100, provenance: 'clientSupplied' } },
  });
  for (const w of [1, 'majority', 0]) {
    const ok = await run({ insert: name, documents: [{}], writeConcern: { w } });
    assert.equal(ok.writeConcernError, undefined, `w: ${w} is satisfiable`);
  }
  const created = await run({ create: `${name}_c`, writeConcern: { w: 2 } });
  assert.equal(created.ok, 1);
  assert.equal(created.writeConcernError?.code, 100, inspect(created));
  // The driver raises it as a write concern error, with the document written.
  const coll = client.db(DB).collection(name);
  const err = await coll.insertOne({ _id: 2 }, { writeConcern: { w: 3 } }).then(() => null, (e) => e);
  assert.ok(err, 'the driver must report the unsatisfiable write concern');
  assert.equal(err.code, 100, inspect(err));
  assert.equal(await coll.countDocuments({ _id: 2 }), 1);
});

test('a standalone refuses w > 1 before writing', async () => {
  const standalone = await startStore();
  const c = await RawConnection.connect(standalone.port);
  try {
    const r = await c.command({ insert: 'wc', documents: [{ _id: 1 }], writeConcern: { w: 2 }, $db: DB });
    assertError(r, 2, 'BadValue', "cannot use 'w' > 1 with a standalone");
    const found = await c.command({ find: 'wc', $db: DB });
    assert.deepEqual(found.cursor.firstBatch, []);
    assert.equal((await c.command({ insert: 'wc', documents: [{ _id: 1 }], writeConcern: { w: 'majority' }, $db: DB })).n, 1);
  } finally {
    c.destroy();
    await standalone.cleanup();
  }
});

// ------------------------------------------------------------ snapshot reads

test('readConcern snapshot outside a transaction reads at one cluster time, reported as atClusterTime, also across getMore', async () => {
  const name = collName();
  const docs = Array.from({ length: 6 }, (_, i) => ({ _id: i, v: 0 }));
  assert.equal((await run({ insert: name, documents: docs })).n, 6);
  const first = await run({ find: name, sort: { _id: 1 }, batchSize: 2, readConcern: { level: 'snapshot' } });
  assert.equal(first.ok, 1, inspect(first));
  const at = first.cursor.atClusterTime;
  assert.ok(at, `cursor.atClusterTime is reported: ${inspect(first.cursor)}`);
  assert.deepEqual(first.cursor.firstBatch.map((d) => d.v), [0, 0]);
  // Writes after the read's time: none of them may show in its later batches.
  assert.equal((await run({ update: name, updates: [{ q: {}, u: { $set: { v: 1 } }, multi: true }] })).nModified, 6);
  assert.equal((await run({ insert: name, documents: [{ _id: 100, v: 1 }] })).n, 1);
  assert.equal((await run({ delete: name, deletes: [{ q: { _id: 5 }, limit: 1 }] })).n, 1);
  const rest = [];
  let id = first.cursor.id;
  while (id && id.toString() !== '0') {
    const more = await run({ getMore: id, collection: name, batchSize: 2 });
    assert.equal(more.ok, 1, inspect(more));
    assert.deepEqual(more.cursor.atClusterTime, at, 'getMore reports the same time');
    rest.push(...more.cursor.nextBatch);
    id = more.cursor.id;
  }
  assert.deepEqual(rest, [{ _id: 2, v: 0 }, { _id: 3, v: 0 }, { _id: 4, v: 0 }, { _id: 5, v: 0 }]);

  // The same time given explicitly: find, aggregate and distinct read the old state.
  const rc = { level: 'snapshot', atClusterTime: at };
  const again = await run({ find: name, sort: { _id: 1 }, readConcern: rc });
  assert.deepEqual(again.cursor.firstBatch, docs);
  assert.deepEqual(again.cursor.atClusterTime, at);
  const agg = await run({ aggregate: name, pipeline: [{ $group: { _id: '$v', n: { $sum: 1 } } }], cursor: {}, readConcern: rc });
  assert.deepEqual(agg.cursor.firstBatch, [{ _id: 0, n: 6 }], inspect(agg));
  assert.deepEqual(agg.cursor.atClusterTime, at);
  const dist = await run({ distinct: name, key: 'v', readConcern: rc });
  assert.deepEqual(dist.values, [0], inspect(dist));
  assert.deepEqual(dist.atClusterTime, at);
  // Without readConcern snapshot the present state, and no atClusterTime.
  const now = await run({ distinct: name, key: 'v' });
  assert.deepEqual(now.values, [1]);
  assert.equal(now.atClusterTime, undefined);
});

test('snapshot read errors as mongod: a future or discarded atClusterTime, and commands that cannot read at a snapshot', async () => {
  const name = collName();
  assert.equal((await run({ insert: name, documents: [{ _id: 1 }] })).n, 1);
  const probe = await run({ find: name, readConcern: { level: 'snapshot' } });
  const at = probe.cursor.atClusterTime;
  const future = new Timestamp({ t: at.high + 3600, i: 1 });
  const f = await run({ find: name, readConcern: { level: 'snapshot', atClusterTime: future } });
  assertError(f, 72, 'InvalidOptions');
  assert.match(f.errmsg, new RegExp(`^readConcern atClusterTime value must not be greater than the current clusterTime\\. Requested clusterTime: Timestamp\\(${at.high + 3600}, 1\\); current clusterTime: Timestamp\\(`));
  const old = await run({ find: name, readConcern: { level: 'snapshot', atClusterTime: new Timestamp({ t: 1000, i: 1 }) } });
  assertError(old, 239, 'SnapshotTooOld', 'Read timestamp Timestamp(1000, 1) is older than the oldest available timestamp.');
  for (const cmd of [
    { insert: name, documents: [{ _id: 2 }] },
    { update: name, updates: [{ q: {}, u: { $set: { a: 1 } } }] },
    { delete: name, deletes: [{ q: {}, limit: 1 }] },
    { count: name },
  ]) {
    const r = await run({ ...cmd, readConcern: { level: 'snapshot' } });
    const cmdName = Object.keys(cmd)[0];
    assertError(r, 72, 'InvalidOptions',
      `Command ${cmdName} does not support { readConcern: { level: "snapshot" } } :: caused by :: read concern not supported`);
  }
  assert.deepEqual((await run({ find: name })).cursor.firstBatch, [{ _id: 1 }], 'nothing was written');
  assertError(await run({ find: name, readConcern: { level: 'local', atClusterTime: at } }), 72, 'InvalidOptions',
    'atClusterTime field can be set only if level is equal to snapshot');
  assertError(await run({ find: name, readConcern: { level: 'snapshot', atClusterTime: at, afterClusterTime: at } }), 72,
    'InvalidOptions', 'Can not specify both afterClusterTime and atClusterTime');
});

test('a driver snapshot session sees one point in time for all its reads', async () => {
  const name = collName();
  const coll = client.db(DB).collection(name);
  await coll.insertMany([{ _id: 1, v: 'a' }, { _id: 2, v: 'b' }]);
  const session = client.startSession({ snapshot: true });
  try {
    assert.deepEqual(await coll.find({}, { session }).sort({ _id: 1 }).toArray(), [{ _id: 1, v: 'a' }, { _id: 2, v: 'b' }]);
    await coll.insertOne({ _id: 3, v: 'c' });
    await coll.updateOne({ _id: 1 }, { $set: { v: 'z' } });
    assert.deepEqual(await coll.find({}, { session }).sort({ _id: 1 }).toArray(), [{ _id: 1, v: 'a' }, { _id: 2, v: 'b' }]);
    assert.deepEqual((await coll.distinct('v', {}, { session })).sort(), ['a', 'b']);
    assert.deepEqual(await coll.aggregate([{ $count: 'n' }], { session }).toArray(), [{ n: 2 }]);
  } finally {
    await session.endSession();
  }
  assert.equal(await coll.countDocuments(), 3);
});

// ------------------------------------------------------------ expressions on literal field names

test('$getField, $setField and $unsetField take field names literally (dots, $); every error carries its codeName', async () => {
  const name = collName();
  assert.equal((await run({ insert: name, documents: [{ _id: 1, 'a.b': 1, a: { b: 2 } }] })).n, 1);
  const got = await run({
    aggregate: name,
    pipeline: [{ $project: { _id: 0, dotted: { $getField: 'a.b' }, path: '$a.b' } }],
    cursor: {},
  });
  assert.deepEqual(got.cursor.firstBatch, [{ dotted: 1, path: 2 }], inspect(got));
  const upd = await run({
    update: name,
    updates: [{ q: { _id: 1 }, u: [{ $replaceWith: { $setField: { field: { $literal: '$x' }, value: 7, input: '$$ROOT' } } }] }],
  });
  assert.equal(upd.nModified, 1, inspect(upd));
  const unset = await run({
    update: name,
    updates: [{ q: { _id: 1 }, u: [{ $replaceWith: { $unsetField: { field: 'a.b', input: '$$ROOT' } } }] }],
  });
  assert.equal(unset.nModified, 1, inspect(unset));
  assert.deepEqual((await run({ find: name })).cursor.firstBatch, [{ _id: 1, a: { b: 2 }, $x: 7 }]);
  // A code without a name of its own is "Location<code>", as mongod names it.
  const bad = await run({ aggregate: name, pipeline: [{ $project: { v: { $getField: { field: 'k', bad: 1 } } } }], cursor: {} });
  assertError(bad, 3041701, 'Location3041701');
});

// ------------------------------------------------------------ command-level let

test('a command\'s let binds $$variables in the filters of find, update, delete and findAndModify', async () => {
  const name = collName();
  assert.equal((await run({ insert: name, documents: [{ _id: 1, x: 'a' }, { _id: 2, x: 'b' }, { _id: 3, x: 'c' }] })).n, 3);
  const let_ = { want: 'b' };
  const found = await run({ find: name, filter: { $expr: { $eq: ['$x', '$$want'] } }, let: let_ });
  assert.deepEqual(found.cursor.firstBatch, [{ _id: 2, x: 'b' }], inspect(found));
  const upd = await run({ update: name, updates: [{ q: { $expr: { $eq: ['$x', '$$want'] } }, u: { $set: { hit: true } } }], let: let_ });
  assert.equal(upd.nModified, 1, inspect(upd));
  const piped = await run({ update: name, updates: [{ q: { _id: 1 }, u: [{ $set: { y: '$$val' } }] }], let: { val: 42 } });
  assert.equal(piped.nModified, 1, inspect(piped));
  assert.deepEqual((await run({ find: name, filter: { _id: 1 } })).cursor.firstBatch, [{ _id: 1, x: 'a', y: 42 }]);
  const fam = await run({ findAndModify: name, query: { $expr: { $eq: ['$_id', '$$id'] } }, update: { $set: { fam: 1 } }, new: true, let: { id: 3 } });
  assert.deepEqual(fam.value, { _id: 3, x: 'c', fam: 1 }, inspect(fam));
  const del = await run({ delete: name, deletes: [{ q: { $expr: { $lt: ['$_id', '$$lim'] } }, limit: 0 }], let: { lim: 2 } });
  assert.equal(del.n, 1, inspect(del));
  const left = (await run({ find: name, sort: { _id: 1 } })).cursor.firstBatch;
  assert.deepEqual(left, [{ _id: 2, x: 'b', hit: true }, { _id: 3, x: 'c', fam: 1 }]);
});

test('a transaction started with readConcern snapshot and atClusterTime reads at that time', async () => {
  const name = collName();
  assert.equal((await run({ insert: name, documents: [{ _id: 1, v: 'old' }] })).n, 1);
  const probe = await run({ find: name, readConcern: { level: 'snapshot' } });
  const at = probe.cursor.atClusterTime;
  assert.equal((await run({ update: name, updates: [{ q: { _id: 1 }, u: { $set: { v: 'new' } } }] })).nModified, 1);
  const lsid = { id: new UUID() };
  const txn = { lsid, txnNumber: Long.fromNumber(1), autocommit: false };
  const r = await run({ find: name, readConcern: { level: 'snapshot', atClusterTime: at }, startTransaction: true, ...txn });
  assert.equal(r.ok, 1, inspect(r));
  assert.deepEqual(r.cursor.firstBatch, [{ _id: 1, v: 'old' }]);
  assert.deepEqual((await run({ find: name, ...txn })).cursor.firstBatch, [{ _id: 1, v: 'old' }], 'every statement reads at it');
  assert.equal((await run({ abortTransaction: 1, ...txn }, 'admin')).ok, 1);
});

// ------------------------------------------------------------ Atlas-only and refused features

test('search index commands and search stages fail with mongod 7.0\'s errors naming Atlas', async () => {
  const name = collName();
  assert.equal((await run({ insert: name, documents: [{ _id: 1 }] })).ok, 1);
  for (const cmd of [
    { createSearchIndexes: name, indexes: [{ name: 's', definition: { mappings: { dynamic: true } } }] },
    { updateSearchIndex: name, name: 's', definition: { mappings: { dynamic: true } } },
    { dropSearchIndex: name, name: 's' },
  ]) {
    assertError(await run(cmd), 115, 'CommandNotSupported', 'Search index commands are only supported with Atlas.');
  }
  for (const stage of ['$listSearchIndexes', '$search', '$searchMeta', '$vectorSearch']) {
    const r = await run({ aggregate: name, pipeline: [{ [stage]: {} }], cursor: {} });
    assertError(r, 6047401, 'Location6047401', `${stage} stage is only allowed on MongoDB Atlas`);
  }
  // The driver's helpers see the same.
  const coll = client.db(DB).collection(name);
  await assert.rejects(coll.createSearchIndex({ name: 's', definition: { mappings: { dynamic: true } } }), /only supported with Atlas/);
  await assert.rejects(coll.listSearchIndexes().toArray(), /only allowed on MongoDB Atlas/);
});

test('time-series collections are refused, never created as ordinary collections', async () => {
  const name = collName();
  const r = await run({ create: name, timeseries: { timeField: 't', metaField: 'm' } });
  assertError(r, 115, 'CommandNotSupported', 'time-series collections are not supported by this store');
  const listed = await run({ listCollections: 1, filter: { name } });
  assert.deepEqual(listed.cursor.firstBatch, [], 'nothing was created');
});

test('clustered collections: created, listed and their cluster key shown as mongod 7.0 does; bad specs refused with its codes', async () => {
  const name = collName();
  assert.equal((await run({ create: name, clusteredIndex: { key: { _id: 1 }, unique: true, name: 'by_id' }, expireAfterSeconds: 3600 })).ok, 1);
  const [info] = (await run({ listCollections: 1, filter: { name } })).cursor.firstBatch;
  assert.deepEqual(info.options, { clusteredIndex: { v: 2, key: { _id: 1 }, name: 'by_id', unique: true }, expireAfterSeconds: 3600 });
  assert.equal(info.idIndex, undefined, 'a clustered collection has no separate _id index');
  const indexes = (await run({ listIndexes: name })).cursor.firstBatch;
  assert.deepEqual(indexes, [{ v: 2, key: { _id: 1 }, name: 'by_id', unique: true, expireAfterSeconds: 3600, clustered: true }]);
  assertError(await run({ dropIndexes: name, index: 'by_id' }), 72, 'InvalidOptions');
  // Documents go in and come out by _id as in any collection; the cluster key is unique.
  assert.equal((await run({ insert: name, documents: [{ _id: 2 }, { _id: 1 }] })).n, 2);
  assert.deepEqual((await run({ find: name, sort: { _id: 1 } })).cursor.firstBatch, [{ _id: 1 }, { _id: 2 }]);
  // Their natural order is the cluster key's, as mongod stores them, not the insertion order.
  assert.deepEqual((await run({ find: name })).cursor.firstBatch, [{ _id: 1 }, { _id: 2 }]);
  assert.deepEqual((await run({ find: name, sort: { $natural: -1 } })).cursor.firstBatch, [{ _id: 2 }, { _id: 1 }]);
  assert.deepEqual((await run({ find: name, hint: { $natural: -1 } })).cursor.firstBatch, [{ _id: 2 }, { _id: 1 }]);
  assert.equal((await run({ insert: name, documents: [{ _id: 1 }] })).writeErrors[0].code, 11000);
  // The default name.
  const plain = collName();
  assert.equal((await run({ create: plain, clusteredIndex: { key: { _id: 1 }, unique: true } })).ok, 1);
  assert.deepEqual((await run({ listIndexes: plain })).cursor.firstBatch, [{ v: 2, key: { _id: 1 }, name: '_id_', unique: true, clustered: true }]);
  // clusteredIndex: false is an ordinary collection.
  const off = collName();
  assert.equal((await run({ create: off, clusteredIndex: false })).ok, 1);
  assert.deepEqual((await run({ listIndexes: off })).cursor.firstBatch.map((i) => i.name), ['_id_']);
  const refused = async (options, code) => {
    const r = await run({ create: collName(), ...options });
    assert.equal(r.ok, 0, inspect(r));
    assert.equal(r.code, code, inspect(r));
  };
  await refused({ clusteredIndex: { key: { _id: 1 }, unique: false } }, 5979700);
  await refused({ clusteredIndex: { key: { a: 1 }, unique: true } }, 197);
  await refused({ clusteredIndex: { key: { _id: -1 }, unique: true } }, 197);
  await refused({ clusteredIndex: { key: { _id: 1, b: 1 }, unique: true } }, 197);
  await refused({ clusteredIndex: { key: { _id: 1 }, unique: true, v: 1 } }, 5979704);
  await refused({ clusteredIndex: { key: { _id: 1 } } }, 40414);
  await refused({ clusteredIndex: { key: { _id: 1 }, unique: true, sparse: true } }, 40415);
  await refused({ clusteredIndex: true }, 5979703);
  await refused({ clusteredIndex: 'yes' }, 5979702);
  await refused({ expireAfterSeconds: 10 }, 72);
  await refused({ clusteredIndex: { key: { _id: 1 }, unique: true }, expireAfterSeconds: -1 }, 72);
  await refused({ clusteredIndex: { key: { _id: 1 }, unique: true }, capped: true, size: 4096 }, 6049200);
});
