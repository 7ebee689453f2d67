'use strict';
// Real clients through the proxy, connected with a plain `mongodb://host:port/` string:
// the Node driver, mongosh, pymongo (Debian's /usr/bin/python3) and libmongoc (the
// tests/integration/c/mongoc_smoke program). Each works on a tiered collection of its own
// (ageField "date", a one-hour horizon) and on untiered collections, which the proxy
// passes through to the archive (transactions and change streams included).

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { REPO_ROOT, makeTempDir } = require('../lib/server');
const { runProgram } = require('../lib/run');
const { startTiered, show } = require('../lib/tiered');
const { expectServerError } = require('../lib/fixture');

const MONGOSH = path.resolve(__dirname, '..', 'node_modules', '.bin', 'mongosh');
const PYTHON = process.env.HALO_PYTHON || '/usr/bin/python3';
const SMOKE_SOURCE = path.join(REPO_ROOT, 'tests', 'integration', 'c', 'mongoc_smoke.c');
const JAVA_SOURCE = path.join(REPO_ROOT, 'tests', 'integration', 'java', 'LegacyDriverSmoke.java');
const JAVA_DRIVER = '/usr/share/java/mongo-java-driver.jar'; // Debian's libmongodb-java 3.6

let t;

before(async () => {
  t = await startTiered({
    collections: [
      'shop.node', 'shop.mongosh', 'shop.pymongo', 'mongoc_smoke.tiered', 'legacy.things',
      { namespace: 'shop.mongosh_stream', changeStreams: true },
    ],
    horizon: '1h',
    guard: '1s',
  });
  await t.waitHealthy();
});
after(async () => {
  if (t) await t.cleanup();
});

test('Node driver: CRUD on a tiered collection, a change stream and a transaction on untiered ones', async () => {
  const client = await t.client();
  const hello = await client.db('admin').command({ hello: 1 });
  assert.equal(hello.msg, 'isdbgrid', show(hello));

  const orders = client.db('shop').collection('node');
  const now = Date.now();
  const docs = Array.from({ length: 30 }, (_, i) => ({ _id: i, date: new Date(now - i * 5 * 60_000), v: i }));
  assert.equal((await orders.insertMany(docs)).insertedCount, 30);
  // Within the horizon (last 50 minutes) and across it.
  const recent = await orders.find({ date: { $gte: new Date(now - 50 * 60_000) } }).sort({ _id: 1 }).toArray();
  assert.deepEqual(recent.map((d) => d._id), [...Array(11).keys()]);
  assert.equal(await orders.countDocuments({ date: { $lt: new Date(now - 100 * 60_000) } }), 9);
  assert.deepEqual(await orders.findOne({ _id: 25 }), docs[25]);
  assert.equal((await orders.updateMany({ v: { $gte: 20 } }, { $inc: { v: 100 } })).modifiedCount, 10);
  assert.equal((await orders.findOneAndUpdate({ _id: 29 }, { $set: { last: true } }, { returnDocument: 'after' })).v, 129);
  assert.equal((await orders.deleteMany({ v: { $gte: 125 } })).deletedCount, 5);
  assert.equal(await orders.countDocuments({}), 25);
  const groups = await orders
    .aggregate([{ $match: { date: { $gte: new Date(now - 50 * 60_000) } } }, { $group: { _id: null, s: { $sum: '$v' } } }])
    .toArray();
  assert.deepEqual(groups, [{ _id: null, s: 55 }]);
  await expectServerError(orders.insertOne({ _id: 0 }), 11000);

  const feed = client.db('shop').collection('node_feed');
  const stream = feed.watch();
  try {
    assert.equal(await stream.tryNext(), null);
    await feed.insertOne({ _id: 'a' });
    await feed.updateOne({ _id: 'a' }, { $set: { x: 1 } });
    const evs = [await stream.next(), await stream.next()];
    assert.deepEqual(evs.map((e) => `${e.operationType}:${e.documentKey._id}`), ['insert:a', 'update:a']);
  } finally {
    await stream.close();
  }

  const ledger = client.db('shop').collection('node_ledger');
  const session = client.startSession();
  try {
    await session.withTransaction(async () => {
      await ledger.insertOne({ _id: 1, amount: 10 }, { session });
      await ledger.insertOne({ _id: 2, amount: -10 }, { session });
    });
  } finally {
    await session.endSession();
  }
  assert.deepEqual(await ledger.find().sort({ _id: 1 }).toArray(), [{ _id: 1, amount: 10 }, { _id: 2, amount: -10 }]);
});

// ---------------------------------------------------------------------------------------
// mongosh

function mongosh(home, script) {
  const globalConfig = path.join(home, 'mongosh.conf');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MONGOSH, t.uri(), '--quiet', '--norc', '--eval', script], {
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
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

test('mongosh: CRUD on a tiered collection, transactions on an untiered and a tiered one (withTransaction), watch() on a tiered one, haloclineExplain', async () => {
  assert.ok(fs.existsSync(MONGOSH), `mongosh not installed at ${MONGOSH}; run npm ci --ignore-scripts in tests/js`);
  const home = makeTempDir('halocline-mongosh-home-');
  fs.writeFileSync(
    path.join(home, 'mongosh.conf'),
    JSON.stringify({ forceDisableTelemetry: true, updateURL: '', snippetIndexSourceURLs: '' }),
  );
  const r = await mongosh(
    home,
    `
    const c = db.getSiblingDB('shop').mongosh;
    const now = Date.now();
    c.insertMany(Array.from({ length: 12 }, (_, i) => ({ _id: i, date: new Date(now - i * 10 * 60000), k: i % 3 })));
    c.updateOne({ _id: 1 }, { $set: { k: 10 } });
    c.deleteOne({ _id: 2 });
    const session = db.getMongo().startSession();
    const notes = session.getDatabase('shop').mongosh_notes;
    session.startTransaction();
    notes.insertOne({ _id: 'x' });
    notes.insertOne({ _id: 'y' });
    session.commitTransaction();
    session.endSession();
    let txnCode = null;
    const s2 = db.getMongo().startSession();
    s2.startTransaction();
    try { s2.getDatabase('shop').mongosh.insertOne({ _id: 'txn', date: new Date() }); } catch (e) { txnCode = e.code; }
    s2.abortTransaction();
    // withTransaction on the tiered collection, and a change stream on a tiered one.
    const s3 = db.getMongo().startSession();
    s3.withTransaction(() => {
      const m = s3.getDatabase('shop').mongosh;
      m.updateOne({ _id: 0 }, { $set: { inTxn: 1 } });
      m.updateOne({ _id: 3 }, { $set: { inTxn: 1 } });
    });
    s3.endSession();
    const st = db.getSiblingDB('shop').mongosh_stream;
    const cs = st.watch();
    st.insertOne({ _id: 'ev', date: new Date() });
    const ev = cs.next();
    cs.close();
    print(JSON.stringify({
      msg: db.adminCommand({ hello: 1 }).msg,
      recent: c.find({ date: { $gte: new Date(now - 35 * 60000) } }).sort({ _id: 1 }).toArray().map(d => d._id),
      one: c.findOne({ _id: 1 }).k,
      count: c.countDocuments({}),
      byK: c.aggregate([{ $match: { date: { $gte: new Date(now - 200 * 60000) } } }, { $group: { _id: '$k', n: { $sum: 1 } } }, { $sort: { _id: 1 } }]).toArray(),
      notes: db.getSiblingDB('shop').mongosh_notes.find().sort({ _id: 1 }).toArray().map(d => d._id),
      txnCode,
      inTxn: c.find({ inTxn: 1 }).sort({ _id: 1 }).toArray().map(d => d._id),
      event: [ev.operationType, ev.documentKey._id],
      explain: db.adminCommand({ haloclineExplain: { find: 'mongosh', filter: { _id: 3 } }, db: 'shop' }).tier,
    }));
  `,
  );
  assert.equal(r.code, 0, `mongosh exited ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
  let out;
  try {
    out = JSON.parse(r.stdout.trim().split('\n').at(-1));
  } catch {
    throw new Error(`mongosh printed no JSON:\n${r.stdout}\n${r.stderr}`);
  }
  assert.equal(out.msg, 'isdbgrid');
  assert.deepEqual(out.recent, [0, 1, 3]);
  assert.equal(out.one, 10);
  assert.equal(out.count, 11);
  // k: ids 0..11 minus 2, with _id 1 moved to k 10: k0 {0,3,6,9}, k1 {4,7,10}, k2 {5,8,11}, k10 {1}
  assert.deepEqual(out.byK, [
    { _id: 0, n: 4 },
    { _id: 1, n: 3 },
    { _id: 2, n: 3 },
    { _id: 10, n: 1 },
  ]);
  assert.deepEqual(out.notes, ['x', 'y']);
  // A transaction on the tiered collection runs (in the fast tier); aborted, it leaves
  // nothing (count is still 11).
  assert.equal(out.txnCode, null);
  assert.deepEqual(out.inTxn, [0, 3]);
  assert.deepEqual(out.event, ['insert', 'ev']);
  assert.equal(out.explain, 'fast-then-archive');
});

// ---------------------------------------------------------------------------------------
// pymongo

const PY_SCRIPT = String.raw`
import sys, json, datetime
from pymongo import MongoClient
from pymongo.errors import OperationFailure, DuplicateKeyError
c = MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000)
out = {}
out['msg'] = c.admin.command('ismaster').get('msg')
now = datetime.datetime.utcnow().replace(microsecond=0)
o = c.shop.pymongo
o.insert_many([{'_id': i, 'date': now - datetime.timedelta(minutes=7 * i), 'v': i} for i in range(20)])
out['recent'] = sorted(d['_id'] for d in o.find({'date': {'$gte': now - datetime.timedelta(minutes=30)}}))
out['old'] = o.count_documents({'date': {'$lt': now - datetime.timedelta(minutes=70)}})
o.update_one({'_id': 3}, {'$inc': {'v': 100}})
out['three'] = o.find_one({'_id': 3})['v']
out['deleted'] = o.delete_many({'v': {'$gte': 15}}).deleted_count
out['count'] = o.count_documents({})
out['distinct'] = sorted(o.distinct('v', {'date': {'$gte': now - datetime.timedelta(minutes=30)}}))
try:
    o.insert_one({'_id': 0})
    out['dup'] = None
except DuplicateKeyError as e:
    out['dup'] = e.code
n = c.shop.pymongo_notes
with c.start_session() as s:
    with s.start_transaction():
        n.insert_one({'_id': 1}, session=s)
        n.insert_one({'_id': 2}, session=s)
out['notes'] = sorted(d['_id'] for d in n.find())
with c.start_session() as s:
    s.start_transaction()
    try:
        o.insert_one({'_id': 'txn', 'date': now}, session=s)
        out['txnCode'] = None
    except OperationFailure as e:
        out['txnCode'] = e.code
    s.abort_transaction()
out['txnLeft'] = o.count_documents({'_id': 'txn'})
with n.watch(max_await_time_ms=1000) as cs:
    n.insert_one({'_id': 3})
    ev = cs.next()
    out['event'] = [ev['operationType'], ev['documentKey']['_id']]
try:
    with o.watch() as bad:
        bad.try_next()
    out['watchCode'] = None
except OperationFailure as e:
    out['watchCode'] = e.code
out['explain'] = c.admin.command({'haloclineExplain': {'insert': 'pymongo', 'documents': [{'_id': 'e'}]}, 'db': 'shop'})['tier']
print(json.dumps(out))
`;

test('pymongo: CRUD on a tiered collection, a transaction and a change stream on an untiered one', async () => {
  assert.ok(fs.existsSync(PYTHON), `${PYTHON} not found`);
  const r = await runProgram(PYTHON, ['-c', PY_SCRIPT, t.uri()], { timeoutMs: 120_000, env: { PYTHONDONTWRITEBYTECODE: '1' } });
  assert.ok(!r.timedOut, `pymongo script timed out\n${r.stdout}\n${r.stderr}`);
  assert.equal(r.code, 0, `pymongo script failed (exit ${r.code})\n${r.stdout}\n${r.stderr}`);
  const out = JSON.parse(r.stdout.trim().split('\n').at(-1));
  assert.deepEqual(out, {
    msg: 'isdbgrid',
    recent: [0, 1, 2, 3, 4],
    old: 9, // i >= 11 (7 * i > 70)
    three: 103,
    deleted: 6, // v 15..19 and _id 3 (v 103)
    count: 14,
    distinct: [0, 1, 2, 4],
    dup: 11000,
    notes: [1, 2],
    txnCode: null, // runs in the fast tier
    txnLeft: 0, // aborted
    event: ['insert', 3],
    watchCode: 115,
    explain: 'fast',
  });
});

// ---------------------------------------------------------------------------------------
// libmongoc

/** $MONGOC_SMOKE_BIN (built by CMake from this tree), else compile the program here. */
async function smokeBinary() {
  if (process.env.MONGOC_SMOKE_BIN) return process.env.MONGOC_SMOKE_BIN;
  for (const preset of ['asan-ubsan', 'debug', 'release']) {
    const p = path.join(REPO_ROOT, 'build', preset, 'tests', 'integration', 'mongoc_smoke');
    if (fs.existsSync(p) && fs.statSync(p).mtimeMs >= fs.statSync(SMOKE_SOURCE).mtimeMs) return p;
  }
  const flags = await runProgram('pkg-config', ['--cflags', '--libs', 'libmongoc-1.0']);
  assert.equal(flags.code, 0, `pkg-config libmongoc-1.0 failed: ${flags.stderr}`);
  const out = path.join(makeTempDir('halocline-mongoc-'), 'mongoc_smoke');
  const r = await runProgram(process.env.CC || 'cc', ['-std=gnu11', '-O1', '-g', '-o', out, SMOKE_SOURCE, ...flags.stdout.trim().split(/\s+/)]);
  assert.equal(r.code, 0, `compiling mongoc_smoke failed:\n${r.stderr}`);
  return out;
}

for (const [label, coll] of [
  ['an untiered collection (passthrough)', 'passthrough'],
  ['a tiered collection', 'tiered'],
]) {
  test(`libmongoc (mongoc_smoke): CRUD, cursors, indexes and errors on ${label}`, async () => {
    const bin = await smokeBinary();
    const r = await runProgram(bin, [t.uri(), '--coll', coll], { timeoutMs: 180_000 });
    const out = `${r.stdout}\n${r.stderr}`;
    assert.ok(!r.timedOut, `mongoc_smoke timed out\n${out}`);
    assert.equal(r.code, 0, `mongoc_smoke --coll ${coll} failed (exit ${r.code}, signal ${r.signal})\n${out}`);
    assert.match(r.stdout, /mongoc_smoke: OK/);
  });
}

test('the Java driver 3.6 (YCSB 0.17\'s) connects through the proxy (isMaster and buildinfo over OP_QUERY) and works', async () => {
  assert.ok(fs.existsSync(JAVA_DRIVER), `${JAVA_DRIVER} missing: scripts/install-deps.sh installs libmongodb-java`);
  const dir = makeTempDir('halocline-java-');
  const javac = await runProgram('javac', ['-cp', JAVA_DRIVER, '-d', dir, JAVA_SOURCE], { timeoutMs: 120_000 });
  assert.equal(javac.code, 0, `javac failed:\n${javac.stderr}`);
  const r = await runProgram('java', ['-cp', `${dir}:${JAVA_DRIVER}`, 'LegacyDriverSmoke', t.uri(), 'legacy', 'things'], {
    timeoutMs: 120_000,
  });
  assert.equal(r.code, 0, `the Java driver failed:\n${r.stdout}\n${r.stderr}`);
  assert.deepEqual(r.stdout.trim().split('\n').slice(1), ['inserted 50', 'user7 changed', 'scanned 50', 'after delete 49']);
  assert.match(r.stdout, /^buildinfo version \d+\.\d+/);
});

test('untiered collections keep the store\'s features through the proxy: a clustered collection with its cluster key', async () => {
  const client = await t.client();
  const db = client.db('passthrough');
  await db.createCollection('clustered', { clusteredIndex: { key: { _id: 1 }, unique: true, name: 'by_id' }, expireAfterSeconds: 3600 });
  const [info] = await db.listCollections({ name: 'clustered' }).toArray();
  assert.deepEqual(info.options.clusteredIndex, { v: 2, key: { _id: 1 }, name: 'by_id', unique: true }, show(info));
  assert.equal(info.options.expireAfterSeconds, 3600);
  assert.equal(info.idIndex, undefined, 'a clustered collection has no separate _id index');
  const coll = db.collection('clustered');
  await coll.insertMany([{ _id: 2, v: 'b' }, { _id: 1, v: 'a' }]);
  assert.deepEqual(await coll.find().toArray(), [{ _id: 1, v: 'a' }, { _id: 2, v: 'b' }]);
  const indexes = await coll.indexes();
  assert.deepEqual(indexes.map((i) => [i.name, i.clustered]), [['by_id', true]], show(indexes));
  await assert.rejects(coll.dropIndex('by_id'), (e) => e.code === 72, 'the cluster key cannot be dropped (72)');
});
