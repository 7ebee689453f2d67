'use strict';
// Transactions on tiered collections (docs/CONSISTENCY.md, Transactions): a transaction
// that touches a tiered collection runs in the fast tier, after each statement has copied
// up what it may read or write that lives only in the archive. The feeder does not run
// here (workers disabled), so the archive keeps its old versions: every answer that
// includes a document only the archive held comes from the promotion, and every answer
// that shows a transaction's write comes from the fast tier.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { UUID } = require('mongodb');
const W = require('../lib/wire');
const { startTiered, ProxyServer, show } = require('../lib/tiered');
const { expectServerError } = require('../lib/fixture');

const OLD = new Date(Date.now() - 400 * 86_400_000);
const LIMIT = 30; // tiering.transactionPromotionLimit
let t;
let client;
let orders;
let customers;

before(async () => {
  t = await startTiered({
    collections: ['shop.orders'], horizon: '10m', workers: false, startProxy: false,
    extra: { tiering: { transactionPromotionLimit: LIMIT } },
  });
  const archive = await t.tierClient('archive');
  const docs = [];
  for (let i = 0; i < 60; i++) docs.push({ _id: i, date: new Date(OLD.getTime() + i * 1000), kind: i % 3, n: i });
  await archive.db('shop').collection('orders').insertMany(docs);
  await t.startProxy();
  client = await t.client({ monitorCommands: true });
  orders = client.db('shop').collection('orders');
  customers = client.db('shop').collection('customers');
});

after(async () => {
  if (t) await t.cleanup();
});

/** Runs `fn` in session.withTransaction; returns what it returned and how many attempts it took. */
async function inTransaction(fn) {
  const session = client.startSession();
  let attempts = 0;
  let out;
  try {
    await session.withTransaction(async () => {
      attempts++;
      out = await fn(session);
    });
  } finally {
    await session.endSession();
  }
  return { out, attempts };
}

test('a committed transaction reads, updates and deletes archive-only documents and inserts new ones', async () => {
  const { out } = await inTransaction(async (session) => {
    const one = await orders.findOne({ _id: 1 }, { session });
    await orders.updateOne({ _id: 1 }, { $set: { n: 1001 } }, { session });
    await orders.deleteOne({ _id: 2 }, { session });
    await orders.insertOne({ _id: 'new-1', date: new Date(), kind: 9, n: 0 }, { session });
    const seen = await orders.find({ _id: { $in: [1, 2, 'new-1'] } }, { session }).sort({ _id: 1 }).toArray();
    return { one, seen };
  });
  assert.equal(out.one.n, 1, show(out.one));
  // Inside the transaction, its own writes.
  assert.deepEqual(out.seen.map((d) => [d._id, d.n]), [[1, 1001], ['new-1', 0]]);
  // After the commit, through the proxy; the archive still has the old versions.
  assert.equal((await orders.findOne({ _id: 1 })).n, 1001);
  assert.equal(await orders.findOne({ _id: 2 }), null);
  assert.ok(await orders.findOne({ _id: 'new-1' }));
  const archived = await t.tierDocs('archive', 'shop.orders', { _id: { $in: [1, 2] } });
  assert.deepEqual(archived.map((d) => [d._id, d.n]), [[1, 1], [2, 2]]);
  // The delete left its tombstone (CONSISTENCY.md, Deletes), in the same transaction.
  const tombs = await t.tombstones('shop.orders');
  assert.ok(tombs.some((d) => d._id.id === 2), show(tombs));
});

test('an aborted transaction leaves nothing: not its update, its delete nor its insert', async () => {
  const session = client.startSession();
  try {
    session.startTransaction();
    // Read first: the first statement copies both up before the snapshot is taken.
    assert.equal((await orders.find({ _id: { $in: [4, 5] } }, { session }).toArray()).length, 2);
    await orders.updateOne({ _id: 4 }, { $set: { n: -4 } }, { session });
    await orders.deleteOne({ _id: 5 }, { session });
    await orders.insertOne({ _id: 'aborted', date: new Date() }, { session });
    await session.abortTransaction();
  } finally {
    await session.endSession();
  }
  assert.equal((await orders.findOne({ _id: 4 })).n, 4);
  assert.equal((await orders.findOne({ _id: 5 })).n, 5);
  assert.equal(await orders.findOne({ _id: 'aborted' }), null);
  assert.ok(!(await t.tombstones('shop.orders')).some((d) => d._id.id === 5));
});

test('range reads in a transaction see every archive match: find, countDocuments, distinct, aggregate', async () => {
  const { out } = await inTransaction(async (session) => ({
    find: await orders.find({ kind: 0, n: { $lt: 30 } }, { session }).sort({ _id: 1 }).toArray(),
    count: await orders.countDocuments({ kind: 1, n: { $gte: 30, $lt: 50 } }, { session }),
    distinct: await orders.distinct('kind', { _id: { $gte: 0, $lt: 12 } }, { session }),
    groups: await orders
      .aggregate([{ $match: { n: { $gte: 50, $lt: 60 } } }, { $group: { _id: '$kind', c: { $sum: 1 } } }, { $sort: { _id: 1 } }], { session })
      .toArray(),
  }));
  assert.deepEqual(out.find.map((d) => d._id), [0, 3, 6, 9, 12, 15, 18, 21, 24, 27]);
  assert.equal(out.count, 7); // 31, 34, ..., 49
  assert.deepEqual(out.distinct.sort(), [0, 1, 2]);
  // 50..59, minus nothing: kind 0 {51,54,57}, 1 {52,55,58}, 2 {50,53,56,59}
  assert.deepEqual(out.groups, [{ _id: 0, c: 3 }, { _id: 1, c: 3 }, { _id: 2, c: 4 }]);
});

test('a later statement that needs a document copied up after the snapshot retries the transaction (TransientTransactionError)', async () => {
  const labels = [];
  const listener = (e) => {
    if (e.reply && e.reply.errorLabels) labels.push(e.reply.errorLabels);
  };
  client.on('commandSucceeded', listener);
  client.on('commandFailed', (e) => {
    if (e.failure && e.failure.errorLabels) labels.push(e.failure.errorLabels);
  });
  let r;
  try {
    r = await inTransaction(async (session) => {
      const a = await orders.findOne({ _id: 10 }, { session }); // starts the snapshot
      const b = await orders.findOne({ _id: 44 }, { session }); // only in the archive until now
      return [a.n, b.n];
    });
  } finally {
    client.off('commandSucceeded', listener);
    client.removeAllListeners('commandFailed');
  }
  assert.deepEqual(r.out, [10, 44]);
  assert.equal(r.attempts, 2, 'the first attempt could not see _id 44 at its snapshot');
  assert.ok(labels.some((l) => l.includes('TransientTransactionError')), show(labels));
  // The second time both are in the fast tier before the snapshot: one attempt.
  const again = await inTransaction(async (session) => {
    const a = await orders.findOne({ _id: 10 }, { session });
    const b = await orders.findOne({ _id: 44 }, { session });
    return [a.n, b.n];
  });
  assert.equal(again.attempts, 1);
});

test('an insert in a transaction of an _id the archive holds fails with a duplicate key', async () => {
  const session = client.startSession();
  try {
    session.startTransaction();
    await expectServerError(orders.insertOne({ _id: 20, date: new Date() }, { session }), 11000);
    await session.abortTransaction().catch(() => {});
  } finally {
    await session.endSession();
  }
  assert.equal((await orders.findOne({ _id: 20 })).n, 20);
});

test('a statement matching more archive documents than transactionPromotionLimit fails with 257 and ends the transaction', async () => {
  const session = client.startSession();
  try {
    session.startTransaction();
    await orders.findOne({ _id: 7 }, { session });
    const e = await expectServerError(orders.find({ n: { $gte: 0 } }, { session }).toArray(), 257);
    assert.match(e.message, /transactionPromotionLimit \(30\)/);
    // mongod ends a transaction on such an error: the next statement finds none.
    await expectServerError(orders.findOne({ _id: 8 }, { session }), 251);
    await session.abortTransaction().catch(() => {});
  } finally {
    await session.endSession();
  }
});

test('a transaction that crosses between a tiered and an untiered collection is refused (263) and leaves nothing', async () => {
  for (const order of ['tiered first', 'untiered first']) {
    const session = client.startSession();
    const id = `cross-${order}`;
    try {
      session.startTransaction();
      if (order === 'tiered first') {
        await orders.insertOne({ _id: id, date: new Date() }, { session });
        await expectServerError(customers.insertOne({ _id: id }, { session }), 263);
      } else {
        await customers.insertOne({ _id: id }, { session });
        await expectServerError(orders.insertOne({ _id: id, date: new Date() }, { session }), 263);
      }
      await session.abortTransaction().catch(() => {});
    } finally {
      await session.endSession();
    }
    assert.equal(await orders.findOne({ _id: id }), null, order);
    assert.equal(await customers.findOne({ _id: id }), null, order);
  }
});

test('transactions on untiered collections still run in the archive', async () => {
  await inTransaction(async (session) => {
    await customers.insertOne({ _id: 'c1' }, { session });
    await customers.updateOne({ _id: 'c1' }, { $set: { v: 1 } }, { session });
  });
  const archived = await t.tierDocs('archive', 'shop.customers', { _id: 'c1' });
  assert.deepEqual(archived, [{ _id: 'c1', v: 1 }]);
});

test('concurrent transactions writing one document: one commits, the other gets a TransientTransactionError', async () => {
  const s1 = client.startSession();
  const s2 = client.startSession();
  try {
    s1.startTransaction();
    s2.startTransaction();
    await orders.updateOne({ _id: 30 }, { $inc: { n: 1 } }, { session: s1 });
    const e = await expectServerError(orders.updateOne({ _id: 30 }, { $inc: { n: 100 } }, { session: s2 }), 112);
    assert.ok(e.errorLabels && e.errorLabels.includes('TransientTransactionError'), show(e.errorLabels));
    await s1.commitTransaction();
    await s2.abortTransaction().catch(() => {});
  } finally {
    await s1.endSession();
    await s2.endSession();
  }
  assert.equal((await orders.findOne({ _id: 30 })).n, 31);
});

test('a findOneAndDelete in a transaction returns the archive-only document and leaves a tombstone', async () => {
  const { out } = await inTransaction(async (session) => orders.findOneAndDelete({ _id: 33 }, { session }));
  const doc = out && out.value !== undefined ? out.value : out;
  assert.equal(doc.n, 33, show(out));
  assert.equal(await orders.findOne({ _id: 33 }), null);
  assert.ok((await t.tombstones('shop.orders')).some((d) => d._id.id === 33));
});

test('the recoveryToken names the fast tier, and a commit through another proxy commits a tiered transaction', async () => {
  const second = new ProxyServer({
    bin: t.bin,
    configPath: path.join(t.dir, 'proxy-b.yaml'),
    configFor: (port) => t.configFor(port),
    name: 'halocline proxy B',
  });
  await second.start(0);
  const a = await W.RawConnection.connect(t.proxy.port);
  const b = await W.RawConnection.connect(second.port);
  try {
    const lsid = { id: new UUID() };
    const upd = await a.command({
      update: 'orders', updates: [{ q: { _id: 45 }, u: { $set: { n: 4500 } } }],
      lsid, txnNumber: 1n, startTransaction: true, autocommit: false, $db: 'shop',
    });
    assert.equal(upd.ok, 1, show(upd));
    assert.equal(upd.nModified, 1, show(upd));
    assert.equal(upd.recoveryToken.recoveryShardId, 'fast', show(upd));
    const commit = await b.command({
      commitTransaction: 1, lsid, txnNumber: 1n, autocommit: false, recoveryToken: upd.recoveryToken, $db: 'admin',
    });
    assert.equal(commit.ok, 1, show(commit));
  } finally {
    a.destroy();
    b.destroy();
    await second.stop();
  }
  assert.equal((await orders.findOne({ _id: 45 })).n, 4500);
});

test('snapshot reads outside a transaction read the fast tier at one time after copying up what they need; a document copied up after the snapshot gets 246', async () => {
  const session = client.startSession({ snapshot: true });
  try {
    // The first read copies 35 and 38 up from the archive, then takes the snapshot.
    const first = await orders.find({ _id: { $in: [35, 38] } }, { session }).sort({ _id: 1 }).toArray();
    assert.deepEqual(first.map((d) => d.n), [35, 38]);
    // Written after the snapshot, outside the session: the session still reads the old version.
    await orders.updateOne({ _id: 35 }, { $set: { n: 3500 } });
    assert.equal((await orders.findOne({ _id: 35 }, { session })).n, 35);
    assert.equal(await orders.countDocuments({ _id: { $in: [35, 38] }, n: { $lt: 100 } }, { session }), 2);
    // _id 41 lived only in the archive at the snapshot: the fast tier cannot read it at that time.
    const e = await expectServerError(orders.findOne({ _id: 41 }, { session }), 246);
    assert.match(e.message, /snapshot/, show(e));
  } finally {
    await session.endSession();
  }
  // A new snapshot sees the current versions, 41 included.
  const fresh = client.startSession({ snapshot: true });
  try {
    assert.equal((await orders.findOne({ _id: 35 }, { session: fresh })).n, 3500);
    assert.equal((await orders.findOne({ _id: 41 }, { session: fresh })).n, 41);
  } finally {
    await fresh.endSession();
  }
});

// A proof-routed cursor on the fast tier lives at most half the clock-skew guard
// (eviction may reach its range later); a cursor at a snapshot does not need that bound,
// since an eviction after the snapshot is invisible there. The wait is the condition under
// test: the getMore must come later than half the guard.
const pastHalfGuard = () => new Promise((resolve) => setTimeout(resolve, t.guardMs));

test('a transaction\'s cursor on the fast tier serves getMores after half the clock-skew guard', async () => {
  const filter = { n: { $gte: 50, $lt: 60 } };
  const expected = (await orders.find(filter).sort({ _id: 1 }).toArray()).map((d) => d._id);
  assert.ok(expected.length > 3, show(expected));
  const { out } = await inTransaction(async (session) => {
    const cursor = orders.find(filter, { session, batchSize: 2 }).sort({ _id: 1 });
    const ids = [(await cursor.next())._id];
    await pastHalfGuard();
    for await (const d of cursor) ids.push(d._id);
    return ids;
  });
  assert.deepEqual(out, expected);
});

test('a snapshot session\'s cursor on the fast tier serves getMores after half the clock-skew guard', async () => {
  const ids = [51, 52, 53, 54, 55];
  const session = client.startSession({ snapshot: true });
  try {
    const cursor = orders.find({ _id: { $in: ids } }, { session, batchSize: 2 }).sort({ _id: 1 });
    const seen = [(await cursor.next())._id];
    await pastHalfGuard();
    for await (const d of cursor) seen.push(d._id);
    assert.deepEqual(seen, ids);
  } finally {
    await session.endSession();
  }
});
