'use strict';
// The tiered-deployment harness itself (lib/tiered.js), without the proxy: the generated
// YAML parses back to the config object, durations convert, the seeded PRNG replays, and
// the two tiers start as one-member replica sets reachable through the replica-set URIs
// the proxy is configured with, surviving kill -9 on the same port.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { MongoClient } = require('mongodb');
const { runProgram } = require('../lib/run');
const { makeTempDir } = require('../lib/server');
const { Tiered, toYaml, buildProxyConfig, durationMs, makeRng } = require('../lib/tiered');

const PYTHON = process.env.HALO_PYTHON || '/usr/bin/python3';

test('config: YAML round trip, defaults, overrides', async () => {
  const cfg = buildProxyConfig({
    fastUri: 'mongodb://127.0.0.1:1/?replicaSet=fast',
    archiveUri: 'mongodb://127.0.0.1:2/?replicaSet=archive',
    collections: ['shop.orders', { namespace: 'shop.events', ageField: '_id', horizon: '30d' }],
    horizon: 3000,
    guard: '500ms',
    workers: { evictor: { interval: '100ms' } },
    extra: { tiering: { causalWaitTimeout: '2s' } },
  });
  assert.deepEqual(cfg.tiering.collections, [
    { namespace: 'shop.orders', ageField: 'date', horizon: '3000ms' },
    { namespace: 'shop.events', ageField: '_id', horizon: '30d' },
  ]);
  assert.equal(cfg.tiering.clockSkewGuard, '500ms');
  assert.equal(cfg.tiering.causalWaitTimeout, '2s');
  assert.deepEqual(cfg.workers.evictor, { interval: '100ms', maxDocsPerSecond: 10000 });
  assert.equal(cfg.workers.enabled, true);
  assert.deepEqual(buildProxyConfig({ fastUri: 'a', archiveUri: 'b', collections: [], workers: false }).workers, { enabled: false });
  assert.ok(fs.existsSync(PYTHON), `${PYTHON} not found`);
  const file = path.join(makeTempDir('halocline-yaml-'), 'proxy.yaml');
  fs.writeFileSync(file, toYaml(cfg));
  const p = await runProgram(PYTHON, ['-c', 'import sys, json, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))', file]);
  assert.equal(p.code, 0, p.stderr);
  assert.deepEqual(JSON.parse(p.stdout), cfg);
});

test('durations and the seeded PRNG', () => {
  assert.equal(durationMs('500ms'), 500);
  assert.equal(durationMs('2s'), 2000);
  assert.equal(durationMs('5m'), 300_000);
  assert.equal(durationMs('30d'), 30 * 86_400_000);
  assert.equal(durationMs('7'), 7000);
  assert.equal(durationMs(1234), 1234);
  assert.throws(() => durationMs('3 weeks'));
  const a = makeRng(42);
  const b = makeRng(42);
  const xs = Array.from({ length: 20 }, () => a.int(0, 1000));
  assert.deepEqual(Array.from({ length: 20 }, () => b.int(0, 1000)), xs);
  assert.ok(xs.every((x) => x >= 0 && x <= 1000));
});

test('tiers: replica sets reachable through the proxy\'s URIs, kill -9 and restart on the same port', async () => {
  const t = new Tiered({ collections: ['shop.orders'] });
  try {
    await t.startTiers();
    for (const which of ['fast', 'archive']) {
      const c = new MongoClient(t.tierUri(which), { serverSelectionTimeoutMS: 10_000 });
      try {
        await c.connect();
        const hello = await c.db('admin').command({ hello: 1 });
        assert.equal(hello.setName, which);
        assert.equal(hello.isWritablePrimary, true);
        await c.db('shop').collection('orders').insertOne({ _id: which });
      } finally {
        await c.close();
      }
    }
    const port = t.fast.port;
    await t.killFast();
    await t.restartFast();
    assert.equal(t.fast.port, port);
    const fast = await t.tierClient('fast');
    assert.deepEqual(await fast.db('shop').collection('orders').find().toArray(), [{ _id: 'fast' }]);
    assert.deepEqual(await t.tierDocs('archive', 'shop.orders'), [{ _id: 'archive' }]);
  } finally {
    await t.cleanup();
  }
});
