'use strict';
// Start-up options: mongod-style YAML config, cache size, direct I/O, bad
// config refused, and the idle-cursor timeout.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { MongoClient, Long } = require('mongodb');
const { startStore, makeTempDir, haloclineBinary } = require('../lib/server');
const { runProgram } = require('../lib/run');

async function withClient(server, fn) {
  const c = new MongoClient(server.uri(), { serverSelectionTimeoutMS: 10000 });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.close();
    await server.cleanup();
  }
}

test('a YAML config sets the WiredTiger cache size; --directIO serves reads and writes', async () => {
  const dir = makeTempDir('halocline-conf-');
  const conf = path.join(dir, 'halocline.conf');
  fs.writeFileSync(conf, 'storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 0.1\n');
  await withClient(await startStore({ extraArgs: ['--config', conf, '--directIO'] }), async (c) => {
    const status = await c.db('admin').command({ serverStatus: 1 });
    assert.equal(status.wiredTiger.cache['maximum bytes configured'], 102 * 1024 * 1024);
    const coll = c.db('opt').collection('d');
    await coll.insertMany(Array.from({ length: 100 }, (_, i) => ({ _id: i })));
    assert.equal((await coll.find().toArray()).length, 100);
  });
});

test('the WiredTiger engine config string (flag or YAML) is appended to the store\'s own, as mongod', async () => {
  // cache_size is also set by the store: the string comes last, so it wins.
  await withClient(
    await startStore({ extraArgs: ['--wiredTigerEngineConfigString', 'cache_size=50M,eviction_dirty_target=30'] }),
    async (c) => {
      const status = await c.db('admin').command({ serverStatus: 1 });
      assert.equal(status.wiredTiger.cache['maximum bytes configured'], 50 * 1024 * 1024);
    });
  const dir = makeTempDir('halocline-conf-');
  const conf = path.join(dir, 'halocline.conf');
  fs.writeFileSync(conf, 'storage:\n  wiredTiger:\n    engineConfig:\n      configString: "cache_size=40M"\n');
  await withClient(await startStore({ extraArgs: ['--config', conf] }), async (c) => {
    const status = await c.db('admin').command({ serverStatus: 1 });
    assert.equal(status.wiredTiger.cache['maximum bytes configured'], 40 * 1024 * 1024);
  });
  const r = await runProgram(haloclineBinary(), [
    'store', '--port', '0', '--dbpath', makeTempDir('halocline-wtconf-'),
    '--wiredTigerEngineConfigString', 'no_such_key=1']);
  assert.equal(r.code, 1);
  assert.match(r.stdout + r.stderr, /no_such_key/);
});

test('an invalid config file is refused at start with the key named', async () => {
  const dir = makeTempDir('halocline-conf-');
  const conf = path.join(dir, 'bad.conf');
  fs.writeFileSync(conf, 'storage:\n  dbPath: /tmp/x\nbogusSection:\n  a: 1\n');
  const r = await runProgram(haloclineBinary(), ['store', '--config', conf, '--port', '0']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /bogusSection/);
});

test('an idle cursor is reaped after cursorTimeoutMillis and getMore then gets CursorNotFound', async () => {
  await withClient(await startStore({ extraArgs: ['--cursorTimeoutMillis', '300'] }), async (c) => {
    const db = c.db('opt');
    await db.collection('cur').insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i })));
    const first = await db.command({ find: 'cur', batchSize: 2 });
    const id = first.cursor.id;
    assert.ok(id > 0);
    // Wait for the reaper's own report (serverStatus), bounded, not for a fixed time.
    const deadline = Date.now() + 20000;
    let timedOut = 0;
    while (timedOut === 0 && Date.now() < deadline) {
      timedOut = Number((await db.admin().command({ serverStatus: 1 })).metrics.cursor.timedOut);
    }
    assert.ok(timedOut >= 1, 'the reaper timed the cursor out');
    await assert.rejects(db.command({ getMore: Long.fromValue(id), collection: 'cur' }), (e) => e.code === 43);
  });
});
