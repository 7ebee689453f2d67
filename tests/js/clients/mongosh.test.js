'use strict';
// mongosh against the store: `mongosh <uri> --quiet --eval <js>` with a private HOME and a
// global config that turns off telemetry, update checks and the snippet index.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { startStore, makeTempDir } = require('../lib/server');

const MONGOSH = path.resolve(__dirname, '..', 'node_modules', '.bin', 'mongosh');
const RUN_TIMEOUT_MS = 60_000;

let server;
let home;
let globalConfig;

before(async () => {
  assert.ok(fs.existsSync(MONGOSH), `mongosh not installed at ${MONGOSH}; run npm ci --ignore-scripts in tests/js`);
  home = makeTempDir('halocline-mongosh-home-');
  globalConfig = path.join(home, 'mongosh.conf');
  fs.writeFileSync(
    globalConfig,
    JSON.stringify({ forceDisableTelemetry: true, updateURL: '', snippetIndexSourceURLs: '' }),
  );
  server = await startStore();
});
after(async () => {
  if (server) await server.cleanup();
});

/** Runs mongosh; resolves {code, signal, stdout, stderr}. Killed after RUN_TIMEOUT_MS. */
function mongosh(script, { uri = server.uri({ serverSelectionTimeoutMS: '10000' }), extraArgs = [] } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MONGOSH, uri, '--quiet', '--norc', ...extraArgs, '--eval', script], {
      env: {
        ...process.env,
        HOME: home,
        XDG_CONFIG_HOME: path.join(home, '.config'),
        MONGOSH_GLOBAL_CONFIG_FILE_FOR_TESTING: globalConfig,
        MONGOSH_SKIP_NODE_VERSION_CHECK: '1',
        NO_COLOR: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), RUN_TIMEOUT_MS);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (signal === 'SIGKILL') reject(new Error(`mongosh timed out after ${RUN_TIMEOUT_MS} ms\n${stdout}\n${stderr}`));
      else resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Runs a script that prints one JSON line (via print(JSON.stringify(x))) and returns x. */
async function mongoshJson(script) {
  const r = await mongosh(script);
  assert.equal(r.code, 0, `mongosh exited ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
  const lines = r.stdout.trim().split('\n');
  try {
    return JSON.parse(lines.at(-1));
  } catch {
    throw new Error(`mongosh printed no JSON:\n${r.stdout}\n${r.stderr}`);
  }
}

test('mongosh connects: ping, hello, db.version()', async () => {
  const out = await mongoshJson(
    `print(JSON.stringify({ ping: db.runCommand({ ping: 1 }).ok, primary: db.hello().isWritablePrimary, version: db.version() }))`,
  );
  assert.equal(out.ping, 1);
  assert.equal(out.primary, true);
  assert.match(out.version, /^\d+\.\d+\.\d+/);
});

test('mongosh insert, find, count', async () => {
  const out = await mongoshJson(`
    const c = db.getSiblingDB('sh_crud').people;
    const ins = c.insertMany([{ _id: 1, n: 'a', age: 30 }, { _id: 2, n: 'b', age: 40 }, { _id: 3, n: 'c', age: 30 }]);
    const one = c.insertOne({ _id: 4, n: 'd', age: 50 });
    c.updateOne({ _id: 2 }, { $set: { age: 41 } });
    c.deleteOne({ _id: 3 });
    print(JSON.stringify({
      inserted: Object.keys(ins.insertedIds).length,
      oneId: one.insertedId,
      count: c.countDocuments({}),
      est: c.estimatedDocumentCount(),
      find: c.find({ age: { $gt: 35 } }, { n: 1 }).sort({ _id: 1 }).toArray(),
      findOne: c.findOne({ _id: 1 }),
    }));
  `);
  assert.equal(out.inserted, 3);
  assert.equal(out.oneId, 4);
  assert.equal(out.count, 3);
  assert.equal(out.est, 3);
  assert.deepEqual(out.find, [
    { _id: 2, n: 'b' },
    { _id: 4, n: 'd' },
  ]);
  assert.deepEqual(out.findOne, { _id: 1, n: 'a', age: 30 });
});

test('mongosh aggregate and cursor iteration over many batches', async () => {
  const out = await mongoshJson(`
    const c = db.getSiblingDB('sh_agg').sales;
    c.insertMany(Array.from({ length: 300 }, (_, i) => ({ _id: i, k: i % 3, v: i })));
    const groups = c.aggregate([{ $group: { _id: '$k', total: { $sum: '$v' }, n: { $sum: 1 } } }, { $sort: { _id: 1 } }]).toArray();
    let iterated = 0;
    c.find({}).batchSize(7).forEach(() => iterated++);
    print(JSON.stringify({ groups, iterated }));
  `);
  const expect = [0, 1, 2].map((k) => {
    const vs = Array.from({ length: 300 }, (_, i) => i).filter((i) => i % 3 === k);
    return { _id: k, total: vs.reduce((a, b) => a + b, 0), n: vs.length };
  });
  assert.deepEqual(out.groups, expect);
  assert.equal(out.iterated, 300);
});

test('mongosh createIndex and getIndexes; unique violation is an error', async () => {
  const out = await mongoshJson(`
    const c = db.getSiblingDB('sh_idx').users;
    c.insertOne({ email: 'a@x' });
    const name = c.createIndex({ email: 1 }, { unique: true });
    let dupCode = null;
    try { c.insertOne({ email: 'a@x' }); } catch (e) { dupCode = e.code; }
    print(JSON.stringify({ name, indexes: c.getIndexes().map(i => i.name).sort(), dupCode }));
  `);
  assert.equal(out.name, 'email_1');
  assert.deepEqual(out.indexes, ['_id_', 'email_1']);
  assert.equal(out.dupCode, 11000);
});

test('a failing command makes mongosh exit non-zero and show the server error', async () => {
  const r = await mongosh(`db.adminCommand({ noSuchCommandAtAll: 1 })`);
  assert.notEqual(r.code, 0, `mongosh should fail\n${r.stdout}\n${r.stderr}`);
  const all = r.stdout + r.stderr;
  assert.match(all, /MongoServerError/);
  assert.match(all, /no such command/);
});

test('a failing CRUD operation (duplicate key) exits non-zero with E11000', async () => {
  const r = await mongosh(`
    const c = db.getSiblingDB('sh_dup').c;
    c.insertOne({ _id: 1 });
    c.insertOne({ _id: 1 });
  `);
  assert.notEqual(r.code, 0);
  assert.match(r.stdout + r.stderr, /E11000 duplicate key error/);
});

test('mongosh show dbs / show collections', async () => {
  const seed = await mongosh(`db.getSiblingDB('sh_show').things.insertOne({ a: 1 })`);
  assert.equal(seed.code, 0, seed.stderr);
  const dbs = await mongosh(`db.adminCommand({ listDatabases: 1 }).databases.map(d => d.name).join(',')`);
  assert.equal(dbs.code, 0, dbs.stderr);
  assert.match(dbs.stdout, /sh_show/);
  const colls = await mongosh(`db.getSiblingDB('sh_show').getCollectionNames().join(',')`);
  assert.equal(colls.code, 0, colls.stderr);
  assert.match(colls.stdout, /things/);
});
