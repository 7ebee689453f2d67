'use strict';
// Crash durability: kill -9 the store while acknowledged writes are in flight,
// restart it on the same data, and check that every acknowledged write (and its
// index entries) survived, and that every acknowledged delete stayed deleted.

const test = require('node:test');
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const { startStore } = require('../lib/server');

const WRITERS = 8;

// A failed test says whether the store died on its own (a crash or a sanitizer
// report: a write that fails before the kill usually means that), with its output.
async function withDiagnosis(server, e) {
  const p = server.proc;
  if (!p) return e;
  // The socket closes before the exit is reported: give the exit a moment to arrive.
  let timer;
  await Promise.race([p.exited, new Promise((r) => (timer = setTimeout(r, 3000)))]);
  clearTimeout(timer);
  if (p.crashed || p.sanitizerReports.length) {
    e.message += `\nthe store died on its own (exit ${JSON.stringify(p.exitInfo)})\n${p.tail(80)}`;
  }
  return e;
}

// Runs the test body; whatever happens, the client is closed and the store stopped
// (a failure must end the test, not leave the file waiting on an open socket).
async function withStore(body) {
  const server = await startStore({ keepDbpath: false });
  const clients = [];
  const connect = async () => {
    const c = new MongoClient(server.uri(), { serverSelectionTimeoutMS: 5000, retryWrites: false });
    clients.push(c);
    await c.connect();
    return c;
  };
  let failure = null;
  try {
    await body(server, connect);
  } catch (e) {
    failure = await withDiagnosis(server, e);
  }
  for (const c of clients) await c.close(true).catch(() => {});
  try {
    await server.cleanup();
  } catch (e) {
    if (!failure) failure = e;
  }
  if (failure) throw failure;
}

async function runUntilKilled(server, coll, ackedTarget) {
  // deleteSent: deletes issued, acknowledged or not (one in flight at the kill may have applied).
  const acked = { inserted: new Set(), deleted: new Set(), deleteSent: new Set(), incs: new Map() };
  let total = 0;
  let killing = null;
  let failed = false;
  const writer = async (w) => {
    for (let i = 0; !failed; i++) {
      const id = w * 1_000_000 + i;
      try {
        await coll.insertOne({ _id: id, k: id, g: id % 10, pad: 'x'.repeat(200) });
        acked.inserted.add(id);
        if (i % 3 === 2) {
          const target = id - 1;
          await coll.updateOne({ _id: target }, { $inc: { n: 1 } });
          acked.incs.set(target, (acked.incs.get(target) || 0) + 1);
        }
        if (i % 5 === 4) {
          const target = id - 2;
          acked.deleteSent.add(target);
          await coll.deleteOne({ _id: target });
          acked.deleted.add(target);
        }
      } catch (e) {
        if (killing || failed) return; // the server is gone: in-flight writes have no outcome
        failed = true;
        throw e;
      }
      total++;
      if (total >= ackedTarget && !killing) killing = server.kill();
    }
  };
  await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)));
  await killing;
  return acked;
}

test('acknowledged writes survive kill -9 with their indexes', () =>
  withStore(async (server, connect) => {
    let coll = (await connect()).db('durable').collection('orders');
    await coll.createIndex({ k: 1 }, { unique: true });
    await coll.createIndex({ g: 1, k: -1 });
    const target = 300 + Math.floor(Math.random() * 300);
    const acked = await runUntilKilled(server, coll, target);

    await server.restart();
    coll = (await connect()).db('durable').collection('orders');
    const live = [...acked.inserted].filter((id) => !acked.deleteSent.has(id));
    assert.ok(live.length >= 100, `expected many acknowledged inserts, got ${live.length}`);
    const docs = await coll.find({ _id: { $in: live } }).toArray();
    assert.equal(docs.length, live.length, 'every acknowledged insert is present after the crash');
    for (const d of docs) {
      const incs = acked.incs.get(d._id) || 0;
      assert.ok((d.n || 0) >= incs, `doc ${d._id}: ${d.n || 0} increments stored, ${incs} acknowledged`);
    }
    for (const id of acked.deleted) {
      assert.equal(await coll.countDocuments({ _id: id }), 0, `acknowledged delete of ${id} stayed deleted`);
    }
    // The indexes agree with the documents.
    const byUnique = await coll.find({ k: { $in: live } }).hint({ k: 1 }).toArray();
    assert.equal(byUnique.length, live.length, 'unique index has every document');
    const total = await coll.countDocuments({});
    const viaCompound = await coll.countDocuments({ g: { $gte: 0 } }, { hint: { g: 1, k: -1 } });
    assert.equal(viaCompound, total, 'compound index has exactly the stored documents');
    const indexes = (await coll.indexes()).map((i) => i.name).sort();
    assert.deepEqual(indexes, ['_id_', 'g_1_k_-1', 'k_1']);
    // The store still enforces uniqueness after recovery.
    await assert.rejects(coll.insertOne({ _id: 'dup', k: live[0] }), (e) => e.code === 11000);
  }));

// One command, many statements: each statement commits as it runs, and the command's
// writes are made durable together before its reply (one journal sync, or one per
// CommandDurability::kMaxStatements). Batches larger than that bound cross it.
test('acknowledged multi-statement commands survive kill -9 whole', () =>
  withStore(async (server, connect) => {
    let coll = (await connect()).db('durable').collection('batches');
    const BATCH = 300;
    const inserted = new Set();
    const bumped = new Map(); // _id -> acknowledged increments
    let acked = 0;
    let killing = null;
    let failed = false;
    const target = 20 + Math.floor(Math.random() * 20);
    const writer = async (w) => {
      for (let b = 0; !failed; b++) {
        const base = (w * 1000 + b) * BATCH;
        const docs = Array.from({ length: BATCH }, (_, i) => ({ _id: base + i, n: 0, pad: 'y'.repeat(100) }));
        try {
          await coll.insertMany(docs, { ordered: b % 2 === 0 });
          for (const d of docs) inserted.add(d._id);
          const ops = docs.map((d) => ({ updateOne: { filter: { _id: d._id }, update: { $inc: { n: 1 } } } }));
          await coll.bulkWrite(ops, { ordered: false });
          for (const d of docs) bumped.set(d._id, 1);
        } catch (e) {
          if (killing || failed) return; // the server is gone: in-flight writes have no outcome
          failed = true;
          throw e;
        }
        acked++;
        if (acked >= target && !killing) killing = server.kill();
      }
    };
    await Promise.all([0, 1, 2, 3].map(writer));
    await killing;

    await server.restart();
    coll = (await connect()).db('durable').collection('batches');
    assert.ok(inserted.size >= 10 * BATCH, `expected many acknowledged batches, got ${inserted.size} documents`);
    const docs = await coll.find({ _id: { $in: [...inserted] } }, { projection: { n: 1 } }).toArray();
    assert.equal(docs.length, inserted.size, 'every document of every acknowledged insertMany is present');
    const missingIncs = docs.filter((d) => (bumped.get(d._id) || 0) > d.n).map((d) => d._id);
    assert.deepEqual(missingIncs.slice(0, 5), [], 'every acknowledged bulk update is present');
  }));
