'use strict';
// mongosh's everyday admin helpers against the store, each run in real mongosh, with the
// Node driver where it is more precise: collection statistics ($collStats, stats(),
// dataSize(), storageSize(), totalSize(), totalIndexSize()), currentOp/killOp interrupting
// a long scan and a waiting getMore, validate, compact, top, connPoolStats, the profiler
// (setProfilingLevel, getProfilingStatus, system.profile), and the privileges they need.

const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { MongoClient, BSON, Long } = require('mongodb');
const { useStore, expectServerError, CLIENT_DEFAULTS } = require('../lib/fixture');
const { startStore } = require('../lib/server');
const { mongoshJson } = require('../lib/mongosh');

const DB = 'helpers_test';
// A command runs to completion on its connection's thread, delaying the other
// connections of that thread (docs/ARCHITECTURE.md). Connections go to the threads in
// turn, so with more threads than this file opens connections, the killOp below never
// shares a thread with the scan it must stop.
const ctx = useStore({
  dbName: DB,
  storeOptions: { replSet: 'rs0', extraArgs: ['--threads', '256'] },
  uriParams: { replicaSet: 'rs0', directConnection: 'false' },
});

/** Polls `fn` until it returns a truthy value (bounded: fails after timeoutMs). */
async function waitFor(fn, what, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The $currentOp entry of the getMore on cursor `id`, once it shows (bounded wait). */
function getMoreOp(client, id, spec = { allUsers: true }) {
  return waitFor(
    async () => (await currentOps(client, spec)).find((o) => o.command && String(o.command.getMore) === String(id)),
    `the getMore of cursor ${id} in $currentOp`,
  );
}

/** mongosh against this file's store, in database DB; the script's last line prints JSON. */
const sh = (script) => mongoshJson(ctx.server.uri(), `db = db.getSiblingDB('${DB}');\n${script}`);

async function collStats(coll, spec) {
  const [doc] = await coll.aggregate([{ $collStats: spec }]).toArray();
  return doc;
}

async function currentOps(client, spec = { allUsers: true }) {
  return client.db('admin').aggregate([{ $currentOp: spec }]).toArray();
}

// ---------------------------------------------------------------- statistics

test('$collStats storageStats: real sizes from the data and the files', async () => {
  const c = ctx.coll('stats');
  const docs = Array.from({ length: 2000 }, (_, i) => ({ _id: i, tag: `t${i % 7}`, pad: 'x'.repeat(200 + (i % 50)) }));
  await c.insertMany(docs);
  await c.createIndex({ tag: 1 });
  const bsonBytes = docs.reduce((n, d) => n + BSON.calculateObjectSize(d), 0);
  const before = (await collStats(c, { storageStats: {} })).storageStats;
  await ctx.client.db('admin').command({ fsync: 1 }); // a checkpoint: the files hold the data
  const s = await collStats(c, { storageStats: {}, count: {} });
  assert.equal(s.ns, `${DB}.${c.collectionName}`);
  assert.match(s.host, /^127\.0\.0\.1:\d+$/);
  assert.ok(s.localTime instanceof Date);
  assert.equal(s.count, 2000);
  const st = s.storageStats;
  assert.equal(st.size, bsonBytes, 'size is the documents\' BSON bytes');
  assert.equal(st.count, 2000);
  assert.equal(st.avgObjSize, Math.floor(bsonBytes / 2000));
  assert.equal(st.nindexes, 2);
  assert.deepEqual(Object.keys(st.indexSizes).sort(), ['_id_', 'tag_1']);
  assert.ok(st.storageSize > before.storageSize, `the checkpoint grew the file: ${before.storageSize} -> ${st.storageSize}`);
  assert.ok(st.storageSize > 0 && st.storageSize % 4096 === 0, `storageSize ${st.storageSize} is a file size`);
  assert.equal(st.totalIndexSize, st.indexSizes._id_ + st.indexSizes.tag_1);
  assert.equal(st.totalSize, st.storageSize + st.totalIndexSize);
  assert.equal(st.scaleFactor, 1);
  assert.equal(st.capped, false);
  assert.equal(st.wiredTiger['block-manager']['file size in bytes'], st.storageSize);
  assert.match(st.wiredTiger.creationString, /key_format=q/);
  assert.deepEqual(Object.keys(st.indexDetails).sort(), ['_id_', 'tag_1']);
  const kb = (await collStats(c, { storageStats: { scale: 1024 } })).storageStats;
  assert.equal(kb.scaleFactor, 1024);
  assert.equal(kb.size, Math.floor(bsonBytes / 1024));
  assert.equal(kb.storageSize, Math.floor(st.storageSize / 1024));

  // The legacy collStats command reports the same numbers.
  const legacy = await ctx.db.command({ collStats: c.collectionName });
  assert.equal(legacy.size, st.size);
  assert.equal(legacy.storageSize, st.storageSize);
  assert.deepEqual(legacy.indexSizes, st.indexSizes);

  // mongosh's helpers.
  const out = await sh(`const c = db.getCollection('${c.collectionName}');
    const s = c.stats(); const k = c.stats({scale: 1024});
    print(JSON.stringify({ok: s.ok, ns: s.ns, count: s.count, size: s.size, storageSize: s.storageSize,
      nindexes: s.nindexes, indexSizes: s.indexSizes, totalIndexSize: s.totalIndexSize, totalSize: s.totalSize,
      avgObjSize: s.avgObjSize, kbSize: k.size, dataSize: c.dataSize(), storage: c.storageSize(),
      total: c.totalSize(), indexTotal: c.totalIndexSize()}));`);
  assert.equal(out.ok, 1);
  assert.equal(out.ns, `${DB}.${c.collectionName}`);
  assert.equal(out.count, 2000);
  assert.equal(out.size, bsonBytes);
  assert.equal(out.dataSize, bsonBytes);
  assert.equal(out.storageSize, st.storageSize);
  assert.equal(out.storage, st.storageSize);
  assert.equal(out.nindexes, 2);
  assert.deepEqual(out.indexSizes, st.indexSizes);
  assert.equal(out.totalIndexSize, st.totalIndexSize);
  assert.equal(out.indexTotal, st.totalIndexSize);
  assert.equal(out.totalSize, st.totalSize);
  assert.equal(out.total, st.totalSize);
  assert.equal(out.kbSize, bsonBytes / 1024);
});

test('$collStats count, queryExecStats and latencyStats follow the operations', async () => {
  const c = ctx.coll('qstats');
  await c.insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i, a: i })));
  const scans = async () => (await collStats(c, { queryExecStats: {} })).queryExecStats.collectionScans.total;
  const s0 = await scans();
  await c.find({ a: 3 }).toArray(); // no index on a: a collection scan
  await c.find({ a: 4 }).toArray();
  await c.find({ _id: 4 }).toArray(); // the _id index
  assert.equal(await scans(), s0 + 2);
  const lat = (await collStats(c, { latencyStats: { histograms: true } })).latencyStats;
  assert.ok(lat.reads.ops >= 3, JSON.stringify(lat));
  assert.ok(lat.writes.ops >= 1);
  assert.ok(lat.reads.latency > 0);
  const histogramOps = lat.reads.histogram.reduce((n, b) => n + Number(b.count), 0);
  assert.equal(histogramOps, Number(lat.reads.ops), 'every read is in one histogram bucket');
  assert.deepEqual(Object.keys(lat).sort(), ['commands', 'reads', 'transactions', 'writes']);
  assert.equal((await collStats(c, { count: {} })).count, 10);
  // mongosh's latencyStats helper runs the same stage.
  const out = await sh(`print(JSON.stringify(db.getCollection('${c.collectionName}').latencyStats()[0].latencyStats.reads.ops > 0))`);
  assert.equal(out, true);
});

test('$collStats errors: first stage only, known fields, existing collection', async () => {
  const c = ctx.coll('cserr');
  await c.insertOne({});
  await expectServerError(c.aggregate([{ $match: {} }, { $collStats: {} }]).toArray(), 40602);
  await expectServerError(c.aggregate([{ $collStats: { bogus: {} } }]).toArray(), 40415);
  await expectServerError(c.aggregate([{ $collStats: { storageStats: { scale: 0 } } }]).toArray(), 51024);
  await expectServerError(ctx.coll('never').aggregate([{ $collStats: { storageStats: {} } }]).toArray(), 26, 'NamespaceNotFound');
  await expectServerError(ctx.db.aggregate([{ $collStats: {} }]).toArray(), 73);
});

// ---------------------------------------------------------------- currentOp / killOp

/** A cursor id as getMore wants it (the driver may have promoted it to a number). */
const asLong = (id) => (typeof id === 'number' ? Long.fromNumber(id) : id);

/** A getMore that waits for change events on its own connection; resolves with its outcome. */
async function waitingGetMore(client, collName, dbName = DB) {
  const db = client.db(dbName);
  const agg = await db.command({ aggregate: collName, pipeline: [{ $changeStream: {} }], cursor: {} });
  const id = asLong(agg.cursor.id);
  const started = Date.now();
  const outcome = db
    .command({ getMore: id, collection: collName, maxTimeMS: 30_000 })
    .then((r) => ({ reply: r, ms: Date.now() - started }), (e) => ({ error: e, ms: Date.now() - started }));
  return { id, outcome };
}

test('currentOp lists a waiting getMore; killOp (mongosh) interrupts it with 11601', async () => {
  const c = ctx.coll('waiting');
  await c.insertOne({ _id: 0 });
  // No read retries: on a loaded machine a slow handshake could otherwise send the
  // scan twice, and only one of them would be killed here.
  const other = await ctx.newClient({ replicaSet: 'rs0', directConnection: 'false' }, { retryReads: false });
  const { id, outcome } = await waitingGetMore(other, c.collectionName);
  const op = await getMoreOp(ctx.client, id);
  assert.equal(op.type, 'op');
  assert.equal(op.active, true);
  assert.equal(op.op, 'getmore');
  assert.equal(op.ns, `${DB}.${c.collectionName}`);
  assert.equal(typeof op.opid, 'number');
  assert.match(op.desc, /^conn\d+$/);
  assert.equal(op.desc, `conn${op.connectionId}`);
  assert.match(op.client, /^127\.0\.0\.1:\d+$/);
  assert.equal(op.clientMetadata.driver.name, 'nodejs');
  assert.ok(Number(op.microsecs_running) >= 0);
  assert.ok(Number(op.secs_running) >= 0);
  assert.equal(typeof op.currentOpTime, 'string');

  // mongosh sees it too, and kills it.
  const shown = await sh(`const ops = db.currentOp({op: 'getmore'}).inprog;
    print(JSON.stringify(ops.map((o) => ({opid: o.opid, ns: o.ns, active: o.active}))))`);
  assert.ok(shown.some((o) => o.opid === op.opid && o.ns === op.ns && o.active), JSON.stringify(shown));
  const killed = await sh(`print(JSON.stringify(db.killOp(${op.opid})))`);
  assert.equal(killed.ok, 1);
  assert.equal(killed.info, 'attempting to kill op');

  const r = await outcome;
  assert.ok(r.error, `the getMore failed (${JSON.stringify(r.reply)})`);
  assert.equal(r.error.code, 11601);
  assert.equal(r.error.codeName, 'Interrupted');
  assert.equal(r.error.message, 'operation was interrupted');
  assert.ok(r.ms < 25_000, `interrupted, not timed out (${r.ms} ms)`);
  // An interrupted getMore takes its cursor with it.
  await expectServerError(other.db(DB).command({ getMore: id, collection: c.collectionName }), 43, 'CursorNotFound');
  // And it is gone from currentOp.
  const after = await currentOps(ctx.client);
  assert.ok(!after.some((o) => o.opid === op.opid));
});

test('killOp interrupts a long collection scan (Node driver)', async () => {
  const c = ctx.coll('scan');
  await c.insertMany(Array.from({ length: 3000 }, (_, i) => ({ _id: i })));
  // No read retries: on a loaded machine a slow handshake could otherwise send the
  // scan twice, and only one of them would be killed here.
  const other = await ctx.newClient({ replicaSet: 'rs0', directConnection: 'false' }, { retryReads: false });
  // Thousands of expensive $expr evaluations, none matching: minutes of scanning.
  const filter = {
    $expr: { $lt: [{ $size: { $filter: { input: { $range: [0, 20000] }, cond: { $eq: [{ $mod: ['$$this', 3] }, 5] } } } }, 0] },
  };
  const started = Date.now();
  const scan = other
    .db(DB)
    .collection(c.collectionName)
    .find(filter, { comment: 'slow-scan' })
    .toArray()
    .then((docs) => ({ docs }), (error) => ({ error }));
  const op = await waitFor(
    async () => (await currentOps(ctx.client)).find((o) => o.command && o.command.comment === 'slow-scan'),
    'the scan in $currentOp',
  );
  assert.equal(op.op, 'query');
  assert.equal(op.ns, `${DB}.${c.collectionName}`);
  assert.deepEqual(op.command.filter, filter);
  // The legacy command filters the same list.
  const legacy = await ctx.client.db('admin').command({ currentOp: 1, 'command.comment': 'slow-scan' });
  try {
    assert.deepEqual(legacy.inprog.map((o) => o.opid), [op.opid]);
  } finally {
    // Whatever happens, no scan is left to take the server's threads from later tests.
    for (const o of legacy.inprog) if (o.opid !== op.opid) await ctx.client.db('admin').command({ killOp: 1, op: o.opid });
  }
  const reply = await ctx.client.db('admin').command({ killOp: 1, op: op.opid });
  assert.equal(reply.info, 'attempting to kill op');
  const r = await scan;
  assert.ok(r.error, 'the scan was interrupted');
  assert.equal(r.error.code, 11601);
  assert.equal(r.error.message, 'operation was interrupted');
  assert.ok(Date.now() - started < 60_000);
});

test('currentOp options and errors', async () => {
  // The $currentOp aggregate shows itself; idle connections only when asked.
  const mine = await currentOps(ctx.client, {});
  assert.ok(mine.some((o) => o.command && o.command.aggregate === 1 && o.active));
  const idle = await ctx.newClient();
  await idle.db('admin').command({ ping: 1 }); // its pooled connection now sits idle
  const withIdle = await currentOps(ctx.client, { allUsers: true, idleConnections: true });
  assert.ok(withIdle.some((o) => o.active === false && o.desc.startsWith('conn')), 'idle connections listed');
  assert.ok(!mine.some((o) => o.active === false));
  await expectServerError(ctx.db.aggregate([{ $currentOp: {} }]).toArray(), 73);
  await expectServerError(ctx.client.db('admin').aggregate([{ $currentOp: { nope: true } }]).toArray(), 40415);
  await expectServerError(ctx.client.db('admin').aggregate([{ $currentOp: {} }, { $currentOp: {} }]).toArray(), 40602);
  await expectServerError(ctx.client.db('admin').command({ killOp: 1 }), 2);
  await expectServerError(ctx.db.command({ killOp: 1, op: 1 }), 13); // admin only
  // Killing an operation that is not running is not an error, as in mongod.
  assert.equal((await ctx.client.db('admin').command({ killOp: 1, op: 987654321 })).ok, 1);
});

// ---------------------------------------------------------------- validate / compact

test('validate (mongosh and Node): counts records and keys per index', async () => {
  const c = ctx.coll('validate');
  await c.insertMany(Array.from({ length: 30 }, (_, i) => ({ _id: i, tags: [`a${i}`, `b${i}`] })));
  await c.createIndex({ tags: 1 });
  const r = await ctx.db.command({ validate: c.collectionName, full: true });
  assert.equal(r.valid, true);
  assert.equal(r.ns, `${DB}.${c.collectionName}`);
  assert.equal(r.nrecords, 30);
  assert.equal(r.nIndexes, 2);
  assert.deepEqual(r.keysPerIndex, { _id_: 30, tags_1: 60 });
  assert.deepEqual(r.indexDetails, { _id_: { valid: true }, tags_1: { valid: true } });
  assert.equal(r.nInvalidDocuments, 0);
  assert.deepEqual(r.errors, []);
  assert.deepEqual(r.warnings, []);
  assert.deepEqual(r.missingIndexEntries, []);
  assert.deepEqual(r.extraIndexEntries, []);
  const out = await sh(`const v = db.getCollection('${c.collectionName}').validate();
    print(JSON.stringify({valid: v.valid, nrecords: v.nrecords, keysPerIndex: v.keysPerIndex}))`);
  assert.deepEqual(out, { valid: true, nrecords: 30, keysPerIndex: { _id_: 30, tags_1: 60 } });
  await expectServerError(ctx.db.command({ validate: 'no_such_collection' }), 26);
});

test('validate counts documents that break the collection validator', async () => {
  const name = ctx.collName('noncompliant');
  await ctx.db.createCollection(name, { validator: { n: { $gte: 0 } } });
  const c = ctx.db.collection(name);
  await c.insertMany([{ n: 1 }, { n: -1 }, { n: -2 }], { bypassDocumentValidation: true });
  const r = await ctx.db.command({ validate: name });
  assert.equal(r.valid, true);
  assert.equal(r.nNonCompliantDocuments, 2);
  assert.equal(r.warnings.length, 1);
  assert.match(r.warnings[0], /not compliant with the collection's schema/);
});

test('compact (mongosh) returns the space of deleted documents to the filesystem', async () => {
  const c = ctx.coll('compact');
  const pad = 'p'.repeat(1000);
  for (let b = 0; b < 10; b++) await c.insertMany(Array.from({ length: 1000 }, (_, i) => ({ _id: b * 1000 + i, pad })));
  await ctx.client.db('admin').command({ fsync: 1 });
  await c.deleteMany({ _id: { $lt: 9000 } }); // the front of the file
  await ctx.client.db('admin').command({ fsync: 1 });
  const before = (await collStats(c, { storageStats: {} })).storageStats;
  assert.ok(before.freeStorageSize > 0, 'deleted space is free for reuse');
  let out = await sh(`print(JSON.stringify(db.runCommand({compact: '${c.collectionName}'})))`);
  assert.equal(out.ok, 1);
  // WiredTiger frees the deleted records' space once no snapshot can still see them
  // and a checkpoint has written that: on a loaded machine the first compact may come
  // before. Each further attempt checkpoints again (fsync) first.
  for (let attempt = 0; attempt < 10 && !(out.bytesFreed > 0); attempt++) {
    await ctx.client.db('admin').command({ fsync: 1 });
    out = await ctx.db.command({ compact: c.collectionName });
  }
  assert.ok(out.bytesFreed > 0, JSON.stringify(out));
  const after = (await collStats(c, { storageStats: {} })).storageStats;
  assert.ok(after.storageSize < before.storageSize, `${before.storageSize} -> ${after.storageSize}`);
  assert.equal(await c.countDocuments(), 1000, 'compact keeps every document');
  await expectServerError(ctx.db.command({ compact: 'no_such_collection' }), 26);
});

// ---------------------------------------------------------------- top / connPoolStats

test('top counts operations per collection; connPoolStats has mongod\'s shape', async () => {
  const c = ctx.coll('top');
  await c.insertOne({ _id: 1 });
  const ns = `${DB}.${c.collectionName}`;
  const top = async () => (await ctx.client.db('admin').command({ top: 1 })).totals;
  const t0 = (await top())[ns];
  for (let i = 0; i < 3; i++) await c.findOne({ _id: 1 });
  await c.updateOne({ _id: 1 }, { $set: { x: 1 } });
  const totals = await top();
  assert.equal(totals.note, 'all times in microseconds');
  const t1 = totals[ns];
  assert.equal(t1.queries.count - t0.queries.count, 3);
  assert.equal(t1.update.count - t0.update.count, 1);
  assert.equal(t1.readLock.count - t0.readLock.count, 3);
  assert.equal(t1.writeLock.count - t0.writeLock.count, 1);
  assert.equal(t1.total.count - t0.total.count, 4);
  assert.ok(t1.total.time >= t0.total.time);
  for (const k of ['total', 'readLock', 'writeLock', 'queries', 'getmore', 'insert', 'update', 'remove', 'commands'])
    assert.deepEqual(Object.keys(t1[k]).sort(), ['count', 'time'], k);
  await c.drop();
  assert.equal((await top())[ns], undefined, 'a dropped collection leaves top');

  const out = await sh(`print(JSON.stringify(db.adminCommand({connPoolStats: 1})))`);
  assert.equal(out.ok, 1);
  assert.equal(out.totalInUse, 0);
  assert.equal(out.totalCreated, 0);
  assert.deepEqual(out.pools, {});
  assert.deepEqual(out.hosts, {});
});

// ---------------------------------------------------------------- profiler

test('profiler (mongosh): setProfilingLevel/getProfilingStatus and system.profile documents', async () => {
  const pdb = ctx.client.db('profiled_db');
  await pdb.collection('c').insertOne({ _id: 0 });
  const out = await mongoshJson(
    ctx.server.uri(),
    `db = db.getSiblingDB('profiled_db');
     function pick(r) { return {was: r.was, slowms: r.slowms, sampleRate: r.sampleRate, ok: r.ok}; }
     const was = pick(db.setProfilingLevel(2));
     const status = pick(db.getProfilingStatus());
     db.c.find({_id: 0}).comment('profiled-find').toArray();
     db.c.insertOne({_id: 1});
     db.c.updateOne({_id: 1}, {$set: {x: 1}});
     db.c.deleteOne({_id: 1});
     const docs = db.system.profile.find({ns: 'profiled_db.c'}).toArray();
     const off = pick(db.setProfilingLevel(0));
     print(EJSON.stringify({was, status, off, docs}, {relaxed: true}));`,
  );
  assert.deepEqual(out.was, { was: 0, slowms: 100, sampleRate: 1, ok: 1 });
  assert.deepEqual(out.status, { was: 2, slowms: 100, sampleRate: 1, ok: 1 });
  assert.equal(out.off.was, 2);
  const byOp = Object.fromEntries(out.docs.map((d) => [d.op, d]));
  assert.deepEqual(Object.keys(byOp).sort(), ['insert', 'query', 'remove', 'update']);
  const find = byOp.query;
  assert.equal(find.ns, 'profiled_db.c');
  assert.equal(find.command.find, 'c');
  assert.equal(find.command.comment, 'profiled-find');
  assert.equal(find.nreturned, 1);
  assert.equal(typeof find.millis, 'number');
  assert.ok(find.ts.$date, 'ts is a date');
  assert.equal(find.client, '127.0.0.1');
  assert.match(find.appName, /mongosh/);
  assert.equal(find.protocol, 'op_msg');
  assert.ok(find.responseLength > 0);
  assert.equal(byOp.insert.ninserted, 1);
  assert.equal(byOp.update.nModified, 1);
  assert.equal(byOp.remove.ndeleted, 1);

  // Level 0: nothing more is recorded. system.profile is capped, as in mongod.
  const count = await pdb.collection('system.profile').countDocuments({ ns: 'profiled_db.c' });
  await pdb.collection('c').findOne({ _id: 0 });
  assert.equal(await pdb.collection('system.profile').countDocuments({ ns: 'profiled_db.c' }), count);
  const [info] = await pdb.listCollections({ name: 'system.profile' }).toArray();
  assert.equal(info.options.capped, true);
});

test('profiler level 1: slowms decides, a filter replaces it; bad settings are refused', async () => {
  const pdb = ctx.client.db('profiled_slow');
  const c = pdb.collection('c');
  await c.insertOne({ _id: 0 });
  const profiled = async () => (await pdb.collection('system.profile').find({ ns: 'profiled_slow.c' }).toArray()).length;
  let r = await pdb.command({ profile: 1, slowms: 60_000 });
  assert.deepEqual([r.was, r.slowms, r.sampleRate], [0, 100, 1]);
  await c.findOne({ _id: 0 });
  await c.findOne({ _id: 0 });
  // Nothing took a minute: no profile document (and no system.profile at all yet).
  assert.equal(await profiled(), 0);
  r = await pdb.command({ profile: 1, filter: { op: 'query', 'command.comment': 'keep' } });
  assert.equal(r.slowms, 60_000);
  await c.find({ _id: 0 }).comment('keep').toArray();
  await c.find({ _id: 0 }).comment('drop').toArray();
  const docs = await pdb.collection('system.profile').find({ ns: 'profiled_slow.c' }).toArray();
  assert.deepEqual(docs.map((d) => d.command.comment), ['keep']);
  r = await pdb.command({ profile: 0, slowms: 100, filter: 'unset' });
  assert.deepEqual(r.filter, { op: 'query', 'command.comment': 'keep' });
  assert.match(r.note, /filter expression is set/);
  await expectServerError(pdb.command({ profile: 5 }), 2, 'BadValue');
  await expectServerError(pdb.command({ profile: 1, sampleRate: 2 }), 2, 'BadValue');
  await expectServerError(pdb.command({ profile: 1, filter: 3 }), 2, 'BadValue');
});

test('slow query log lines (51803) follow slowms and a database\'s filter, with mongod\'s fields; passwords never show', async () => {
  const pdb = ctx.client.db('slowlog');
  const c = pdb.collection('c');
  await c.insertOne({ _id: 0 });
  const proc = ctx.server.proc;
  const slowLines = [];
  const listener = (line) => {
    if (line.includes('"id":51803')) slowLines.push(JSON.parse(line));
  };
  proc.lineListeners.add(listener);
  const logged = (pred, what) => waitFor(() => slowLines.find(pred), what);
  try {
    // A negative slowms logs every operation (as mongod).
    await pdb.command({ profile: 0, slowms: -1 });
    await c.find({ _id: 0 }).comment('logged-1').toArray();
    const line = await logged((l) => l.attr.command.comment === 'logged-1', 'the find\'s slow query line');
    assert.equal(line.msg, 'Slow query');
    assert.equal(line.c, 'command');
    assert.equal(line.attr.type, 'command');
    assert.equal(line.attr.ns, 'slowlog.c');
    assert.equal(line.attr.command.find, 'c');
    assert.equal(line.attr.nreturned, 1);
    assert.ok(line.attr.reslen > 0);
    assert.equal(line.attr.protocol, 'op_msg');
    assert.match(line.attr.remote, /^127\.0\.0\.1:\d+$/);
    assert.ok(line.attr.durationMillis >= 0);
    // In mongod's order.
    const order = ['type', 'ns', 'appName', 'command', 'nreturned', 'numYields', 'reslen', 'locks', 'remote', 'protocol', 'durationMillis'];
    assert.deepEqual(Object.keys(line.attr), order.filter((k) => k in line.attr));
    // A failed command carries its error.
    await pdb.command({ find: 'c', filter: { $bogus: 1 }, comment: 'failing' }).catch(() => {});
    const failed = await logged((l) => l.attr.command.comment === 'failing', 'the failed find\'s line');
    assert.equal(failed.attr.ok, 0);
    assert.equal(failed.attr.errName, 'BadValue');
    assert.equal(failed.attr.errCode, 2);
    // A password is replaced, never logged.
    const secret = 'never-in-the-log-42';
    await pdb.command({ createUser: 'slowlog_user', pwd: secret, roles: [] });
    const created = await logged((l) => l.attr.command.createUser === 'slowlog_user', 'the createUser line');
    assert.equal(created.attr.command.pwd, 'xxx');
    assert.ok(!proc.stdoutTail.concat(proc.stderrTail).some((l) => l.includes(secret)), 'the password is in the log');
    await pdb.command({ dropUser: 'slowlog_user' });
    // Back to 100 ms: fast operations are not logged; a filter (level 0) decides instead.
    await pdb.command({ profile: 0, slowms: 100, filter: { 'command.comment': 'filtered' } });
    await c.find({ _id: 0 }).comment('not-logged').toArray();
    await c.find({ _id: 0 }).comment('filtered').toArray();
    await logged((l) => l.attr.command.comment === 'filtered', 'the filtered find\'s line');
    assert.ok(!slowLines.some((l) => l.attr.command.comment === 'not-logged'), 'a fast operation the filter does not match was logged');
  } finally {
    proc.lineListeners.delete(listener);
    await pdb.command({ profile: 0, slowms: 100, filter: 'unset' });
  }
});

// ---------------------------------------------------------------- privileges

describe('with --auth: the privileges the helpers need', () => {
  let server;
  const clients = [];
  const connect = async (user) => {
    const c = new MongoClient(server.uri(), {
      ...CLIENT_DEFAULTS,
      ...(user ? { auth: { username: user, password: `${user}-pw` }, authSource: 'admin' } : {}),
    });
    clients.push(c);
    await c.connect();
    return c;
  };
  before(async () => {
    server = await startStore({ replSet: 'rs0', extraArgs: ['--auth'] });
    const anon = await connect();
    await anon.db('admin').command({ createUser: 'root', pwd: 'root-pw', roles: ['root'] });
    const root = await connect('root');
    const users = {
      monitor: [{ role: 'clusterMonitor', db: 'admin' }],
      worker: [{ role: 'readWrite', db: 'app' }],
      appAdmin: [{ role: 'dbAdmin', db: 'app' }],
    };
    for (const [user, roles] of Object.entries(users))
      await root.db('admin').command({ createUser: user, pwd: `${user}-pw`, roles });
    await root.db('app').collection('c').insertOne({ _id: 1 });
  });
  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    if (server) await server.cleanup();
  });

  test('clusterMonitor: currentOp, top, connPoolStats; not validate', async () => {
    const monitor = await connect('monitor');
    const admin = monitor.db('admin');
    assert.ok((await admin.aggregate([{ $currentOp: { allUsers: true } }]).toArray()).length >= 1);
    assert.equal((await admin.command({ currentOp: 1 })).ok, 1);
    assert.equal((await admin.command({ top: 1 })).ok, 1);
    assert.equal((await admin.command({ connPoolStats: 1 })).ok, 1);
    await expectServerError(monitor.db('app').command({ validate: 'c' }), 13, 'Unauthorized');
  });

  test('dbAdmin: validate, compact, profile; not top', async () => {
    const appAdmin = await connect('appAdmin');
    const app = appAdmin.db('app');
    assert.equal((await app.command({ validate: 'c' })).valid, true);
    assert.equal((await app.command({ compact: 'c' })).ok, 1);
    assert.equal((await app.command({ profile: -1 })).was, 0);
    await expectServerError(appAdmin.db('admin').command({ top: 1 }), 13);
  });

  test('readWrite: only its own operations; no bypassDocumentValidation', async () => {
    const worker = await connect('worker');
    const admin = worker.db('admin');
    await expectServerError(admin.aggregate([{ $currentOp: { allUsers: true } }]).toArray(), 13);
    await expectServerError(admin.command({ currentOp: 1 }), 13);
    await expectServerError(admin.command({ top: 1 }), 13);
    await expectServerError(worker.db('app').command({ validate: 'c' }), 13);
    await expectServerError(worker.db('app').command({ profile: 2 }), 13);
    await expectServerError(
      worker.db('app').collection('c').insertOne({ _id: 2 }, { bypassDocumentValidation: true }),
      13,
    );

    // root's waiting getMore: invisible to the worker, and not the worker's to kill.
    const root = await connect('root');
    const rootWait = await waitingGetMore(root, 'c', 'app');
    const rootOp = await getMoreOp(root, rootWait.id);
    assert.deepEqual(rootOp.effectiveUsers, [{ user: 'root', db: 'admin' }]);
    const own = await admin.aggregate([{ $currentOp: {} }]).toArray();
    assert.ok(own.length >= 1 && own.every((o) => o.effectiveUsers[0].user === 'worker'), JSON.stringify(own));
    await expectServerError(admin.command({ killOp: 1, op: rootOp.opid }), 13, 'Unauthorized');

    // Its own waiting getMore it may kill.
    const mine = await waitingGetMore(await connect('worker'), 'c', 'app');
    const myOp = await getMoreOp(worker, mine.id, {});
    assert.equal((await admin.command({ killOp: 1, op: myOp.opid })).ok, 1);
    assert.equal((await mine.outcome).error.code, 11601);

    // root (hostManager through root) may kill anyone's.
    await root.db('admin').command({ killOp: 1, op: rootOp.opid });
    assert.equal((await rootWait.outcome).error.code, 11601);
  });
});
