'use strict';
// `halocline up` (the README's first command, without the build): an archive store, a fast
// store and the proxy under one data directory, with the demo policy's namespace and age
// field taken from the command line; prints the connection string; Ctrl-C stops it all.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { MongoClient } = require('mongodb');
const { startProcess, haloclineBinary, makeTempDir } = require('../lib/server');

test('halocline up --age-field _id: the printed connection string serves a tiered collection on _id', async () => {
  const dir = makeTempDir('halocline-up-');
  const { proc, ready } = await startProcess({
    bin: haloclineBinary(),
    args: ['up', '--dbpath', dir, '--port', '0', '--namespace', 'app.items', '--age-field', '_id', '--horizon', '1h'],
    readyPattern: /^ {2}mongodb:\/\/127\.0\.0\.1:(\d+)\/$/,
    name: 'halocline up',
  });
  let client;
  try {
    assert.match(proc.stdoutTail.join('\n'), /tiered collection: app\.items \(age field '_id', horizon 1h\)/);
    client = new MongoClient(`mongodb://127.0.0.1:${ready[1]}/`, { serverSelectionTimeoutMS: 10_000 });
    await client.connect();
    const items = client.db('app').collection('items');
    await items.insertOne({ n: 1 });
    assert.equal((await items.findOne({}, { projection: { _id: 0 } })).n, 1);
    // An unacknowledged write, then a cursor that needs getMores, through the proxy.
    await items.insertMany(Array.from({ length: 24 }, (_, i) => ({ n: i + 2 })));
    await items.insertOne({ n: 26 }, { writeConcern: { w: 0 } });
    const deadline = Date.now() + 20_000;
    while ((await items.countDocuments({ n: 26 })) === 0 && Date.now() < deadline);
    const ns = (await items.find({}, { batchSize: 5 }).sort({ n: 1 }).toArray()).map((d) => d.n);
    assert.deepEqual(ns, Array.from({ length: 26 }, (_, i) => i + 1));
    const status = await client.db('admin').command({ haloclineStatus: 1 });
    assert.equal(status.collections['app.items'].ageField, '_id');
    // The fast store runs with the fast tier's WiredTiger settings (common/fast_tier.h),
    // the archive with the store's own: WiredTiger records the settings a database
    // was created with in WiredTiger.basecfg.
    const basecfg = (tier) => fs.readFileSync(path.join(dir, tier, 'WiredTiger.basecfg'), 'utf8');
    assert.match(basecfg('fast'), /eviction_dirty_target=30/);
    assert.match(basecfg('fast'), /eviction_dirty_trigger=60/);
    assert.doesNotMatch(basecfg('archive'), /eviction_dirty/);
  } finally {
    if (client) await client.close();
    const exit = await proc.stop({ signal: 'SIGINT' });
    assert.equal(exit.code, 0, proc.tail());
  }
});
