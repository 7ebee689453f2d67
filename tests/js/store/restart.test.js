'use strict';
// Clean shutdown and restart: SIGTERM exits 0, and data, indexes and collections are all
// there after a restart on the same dbpath. A second server on a dbpath in use is refused.
// (Crash durability under kill -9 is durability.test.js.)

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const { startStore, startProcess, waitingForConnections } = require('../lib/server');
const { CLIENT_DEFAULTS } = require('../lib/fixture');

async function withClient(server, fn) {
  const client = new MongoClient(server.uri(), CLIENT_DEFAULTS);
  try {
    await client.connect();
    return await fn(client);
  } finally {
    await client.close();
  }
}

test('SIGTERM exits 0; data, indexes and collections survive a restart', async () => {
  const server = await startStore();
  try {
    await withClient(server, async (client) => {
      const c = client.db('restart').collection('c');
      await c.insertMany(Array.from({ length: 100 }, (_, i) => ({ _id: i, v: i })));
      await c.createIndex({ v: 1 }, { unique: true });
      await c.deleteOne({ _id: 0 });
      await c.updateOne({ _id: 1 }, { $set: { v: 1000 } });
      await client.db('restart').createCollection('empty');
    });
    const info = await server.stop(); // throws on non-zero exit or sanitizer output
    assert.equal(info.code, 0);
    await server.start();
    await withClient(server, async (client) => {
      const db = client.db('restart');
      const names = (await db.listCollections({}, { nameOnly: true }).toArray()).map((x) => x.name).sort();
      assert.deepEqual(names, ['c', 'empty']);
      const c = db.collection('c');
      assert.equal((await c.find({}).toArray()).length, 99);
      assert.equal(await c.findOne({ _id: 0 }), null);
      assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, v: 1000 });
      const idx = (await c.listIndexes().toArray()).map((i) => i.name).sort();
      assert.deepEqual(idx, ['_id_', 'v_1']);
      await assert.rejects(c.insertOne({ _id: 500, v: 1000 }), (e) => e.code === 11000);
      await c.insertOne({ _id: 501, v: 501 });
    });
  } finally {
    await server.cleanup();
  }
});

test('a second server on a dbpath in use exits instead of serving', async () => {
  const server = await startStore();
  try {
    const second = startProcess({
      bin: server.bin,
      args: ['store', '--port', '0', '--dbpath', server.dbpath],
      readyPattern: waitingForConnections,
      name: 'second store',
    });
    await assert.rejects(second, /exited/, 'second instance must exit instead of serving');
    await withClient(server, async (client) => {
      assert.equal((await client.db('admin').command({ ping: 1 })).ok, 1);
    });
  } finally {
    await server.cleanup();
  }
});
