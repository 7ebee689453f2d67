'use strict';
// Handshake and connection behaviour seen by the Node driver.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const { useStore, CLIENT_DEFAULTS } = require('../lib/fixture');
const { startRelay } = require('../lib/relay');

const ctx = useStore({ dbName: 'connect_test' });

test('ping succeeds', async () => {
  const r = await ctx.client.db('admin').command({ ping: 1 });
  assert.equal(r.ok, 1);
});

test('hello reports a writable standalone with mongod limits', async () => {
  const r = await ctx.client.db('admin').command({ hello: 1 });
  assert.equal(r.ok, 1);
  assert.equal(r.isWritablePrimary, true);
  assert.equal(r.maxBsonObjectSize, 16 * 1024 * 1024);
  assert.equal(r.maxMessageSizeBytes, 48_000_000);
  assert.equal(r.maxWriteBatchSize, 100_000);
  assert.ok(r.localTime instanceof Date, 'localTime is a BSON date');
  assert.ok(Number.isInteger(r.minWireVersion));
  assert.ok(r.maxWireVersion >= 17, `maxWireVersion ${r.maxWireVersion} should be >= 17 (6.0+)`);
  assert.ok(Number.isInteger(r.logicalSessionTimeoutMinutes), 'sessions advertised');
  assert.ok(Number.isInteger(r.connectionId));
});

test('legacy isMaster and ismaster both answer', async () => {
  for (const name of ['isMaster', 'ismaster']) {
    const r = await ctx.client.db('admin').command({ [name]: 1 });
    assert.equal(r.ok, 1);
    assert.equal(r.ismaster, true, `${name} reply has ismaster: true`);
  }
});

test('buildInfo has a semver version and versionArray', async () => {
  for (const name of ['buildInfo', 'buildinfo']) {
    const r = await ctx.client.db('admin').command({ [name]: 1 });
    assert.equal(r.ok, 1);
    assert.match(r.version, /^\d+\.\d+\.\d+/);
    assert.ok(Array.isArray(r.versionArray) && r.versionArray.length >= 3);
    assert.equal(r.versionArray[0], Number(r.version.split('.')[0]));
  }
});

test('hello and buildInfo work on any database', async () => {
  const r = await ctx.client.db('some_db').command({ hello: 1 });
  assert.equal(r.isWritablePrimary, true);
  const b = await ctx.client.db('some_db').command({ buildInfo: 1 });
  assert.equal(b.ok, 1);
});

test('getParameter featureCompatibilityVersion (probed by mongosh/drivers)', async () => {
  const r = await ctx.client.db('admin').command({ getParameter: 1, featureCompatibilityVersion: 1 });
  assert.equal(r.ok, 1);
  assert.match(r.featureCompatibilityVersion.version, /^\d+\.\d+$/);
});

test('the driver attaches lsid to commands and endSessions is accepted', async () => {
  const mark = ctx.events.length;
  const session = ctx.client.startSession();
  try {
    await ctx.client.db('admin').command({ ping: 1 }, { session });
  } finally {
    await session.endSession();
  }
  const ping = ctx.started('ping', mark).at(-1);
  assert.ok(ping.command.lsid && ping.command.lsid.id, 'lsid sent');
  const r = await ctx.client.db('admin').command({ endSessions: [ping.command.lsid] });
  assert.equal(r.ok, 1);
});

// For each compressors list: the first one the server supports is used. The relay proves
// that requests and replies after the handshake really travel as OP_COMPRESSED.
for (const [compressors, expected] of [
  ['zlib', 'zlib'],
  ['snappy', 'snappy'],
  ['snappy,zlib,zstd', 'snappy'],
]) {
  test(`compressors=${compressors}: traffic is compressed with ${expected} both ways`, async () => {
    const relay = await startRelay(ctx.server.port);
    const client = new MongoClient(
      `mongodb://127.0.0.1:${relay.port}/?directConnection=true&compressors=${compressors}`,
      CLIENT_DEFAULTS,
    );
    try {
      await client.connect();
      const comment = 'abcdefgh'.repeat(8192); // large and compressible
      const r = await client.db('admin').command({ ping: 1, comment });
      assert.equal(r.ok, 1);
      const b = await client.db('admin').command({ buildInfo: 1 });
      assert.match(b.version, /^\d+\.\d+\.\d+/);
      const compressed = relay.frames.filter((f) => f.opCode === 2012);
      const c2s = compressed.filter((f) => f.dir === 'c2s');
      const s2c = compressed.filter((f) => f.dir === 's2c');
      assert.ok(c2s.length >= 2, `client sent ${c2s.length} compressed frames; frames: ${JSON.stringify(relay.frames.slice(0, 12))}`);
      assert.ok(s2c.length >= 2, `server sent ${s2c.length} compressed replies`);
      for (const f of compressed) assert.equal(f.compressor, expected);
      const bigRequest = c2s.find((f) => f.originalOpcode === 2013 && f.length < comment.length / 4);
      assert.ok(bigRequest, 'the 64 KiB ping was sent compressed to a fraction of its size');
    } finally {
      await client.close();
      await relay.close();
    }
  });

  test(`compressors=${compressors}: CRUD round trip`, async () => {
    const client = await ctx.newClient({ compressors });
    const coll = client.db('connect_test').collection(`compress_${compressors.replace(/,/g, '_')}`);
    const doc = { _id: 1, blob: 'abcdefgh'.repeat(4096), n: 42 };
    await coll.insertOne(doc);
    assert.deepEqual(await coll.findOne({ _id: 1 }), doc);
  });
}

test('many concurrent connections each get answers', async () => {
  const client = await ctx.newClient({ maxPoolSize: '20' });
  const results = await Promise.all(
    Array.from({ length: 50 }, () => client.db('admin').command({ ping: 1 })),
  );
  assert.equal(results.length, 50);
  for (const r of results) assert.equal(r.ok, 1);
});

test('a closed client does not disturb others', async () => {
  const a = await ctx.newClient();
  await a.db('admin').command({ ping: 1 });
  await a.close();
  const r = await ctx.client.db('admin').command({ ping: 1 });
  assert.equal(r.ok, 1);
});

test("the driver's streaming monitor keeps the server known: heartbeats stream, none fails", async () => {
  const client = new MongoClient(ctx.server.uri(), { ...CLIENT_DEFAULTS, heartbeatFrequencyMS: 500, serverMonitoringMode: 'stream' });
  let awaited = 0;
  const streamed = new Promise((resolve, reject) => {
    client.on('serverHeartbeatFailed', (e) => reject(new Error(`a heartbeat failed: ${e.failure?.message}`)));
    client.on('serverHeartbeatSucceeded', (e) => {
      if (e.awaited && ++awaited === 3) resolve();
    });
  });
  try {
    await client.connect();
    await streamed; // three replies of one stream, each after the server's wait
    assert.equal((await client.db('admin').command({ ping: 1 })).ok, 1);
  } finally {
    await client.close();
  }
});
