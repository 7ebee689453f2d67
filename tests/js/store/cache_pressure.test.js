'use strict';
// A WiredTiger cache under pressure (a 10 MiB cache): a multi-document transaction too
// large to ever fit fails with TransactionTooLargeForCache (388) and no
// TransientTransactionError label, so withTransaction gives up at once instead of
// retrying forever on WriteConflict, and the transaction is gone; ordinary writes many
// times the cache's size all succeed and are all there afterwards.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { MongoClient } = require('mongodb');
const { startStore } = require('../lib/server');

let server;
let client;
before(async () => {
  server = await startStore({ replSet: 'rs0', extraArgs: ['--wiredTigerCacheSizeGB', '0.01'] });
  client = new MongoClient(server.uri({ replicaSet: 'rs0', directConnection: 'false' }), {
    serverSelectionTimeoutMS: 10_000,
  });
  await client.connect();
});
after(async () => {
  await client.close();
  await server.cleanup();
});

const docs = (prefix, n, bytes) =>
  Array.from({ length: n }, (_, i) => ({ _id: `${prefix}${i}`, pad: crypto.randomBytes(bytes).toString('base64') }));

test('a transaction too large for the cache fails with TransactionTooLargeForCache, not a retried WriteConflict', async () => {
  const coll = client.db('pressure').collection('big');
  await coll.insertOne({ _id: 'seed' });
  const session = client.startSession();
  let attempts = 0;
  try {
    const err = await session
      .withTransaction(async () => {
        attempts++;
        // Up to 400 MiB of documents in one transaction, forty times the whole cache:
        // WiredTiger rolls it back once eviction has been stuck behind it for a while,
        // which a fast (release) build reaches only after more data than a sanitizer one.
        for (let b = 0; b < 1000; b++) await coll.insertMany(docs(`t${b}_`, 100, 3000), { session });
      })
      .then(
        () => null,
        (e) => e,
      );
    assert.ok(err, 'the transaction cannot commit');
    assert.equal(err.code, 388, `${err.code} ${err.codeName}: ${err.message}`);
    assert.equal(err.codeName, 'TransactionTooLargeForCache');
    assert.match(err.message, /too large and will not fit in the storage engine cache/);
    assert.equal(err.hasErrorLabel('TransientTransactionError'), false, 'not labelled transient: a retry cannot succeed');
    assert.equal(attempts, 1, 'withTransaction did not retry it');
  } finally {
    await session.endSession();
  }
  // Nothing of it is visible: the transaction was aborted.
  assert.equal(await coll.countDocuments({ _id: { $ne: 'seed' } }), 0);
});

test('ordinary writes many times the cache size succeed under the pressure and are all present', async () => {
  const coll = client.db('pressure').collection('plain');
  let n = 0;
  for (let b = 0; b < 40; b++) {
    await coll.insertMany(docs(`p${b}_`, 100, 3000)); // 16 MiB in all
    n += 100;
  }
  const r = await coll.updateMany({}, { $set: { touched: true } });
  assert.equal(r.modifiedCount, n);
  assert.equal(await coll.countDocuments({ touched: true }), n);
  // serverStatus shows what the pressure cost the commands, as mongod's does.
  const { wiredTiger: wt } = await client.db('admin').command({ serverStatus: 1 });
  assert.ok(wt.cache['pages evicted by application threads'] > 0, JSON.stringify(wt));
  assert.ok(wt.cache['modified pages evicted by application threads'] >= 0, JSON.stringify(wt));
  assert.ok(wt['thread-yield']['application thread time evicting (usecs)'] > 0, JSON.stringify(wt));
  assert.ok(wt['thread-yield']['application thread time waiting for cache (usecs)'] >= 0, JSON.stringify(wt));
});
