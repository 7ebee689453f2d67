'use strict';
// Several proxies in front of the same tiers: one connection string lists them
// all (each answers hello like mongos), exactly one holds the worker lease,
// and when it dies another takes the workers over within the lease time.

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { MongoClient } = require('mongodb');
const { startTiered, ProxyServer, waitUntil, durationMs } = require('../lib/tiered');

const LEASE = '2s';
let t;
let second;
after(async () => {
  if (second) await second.kill().catch(() => {});
  if (t) await t.cleanup();
});

async function role(proxy) {
  const c = new MongoClient(proxy.uri(), { serverSelectionTimeoutMS: 5000 });
  try {
    const s = await c.db('admin').command({ haloclineStatus: 1 });
    return s.workers.role;
  } finally {
    await c.close();
  }
}

test('two proxies: one connection string, one worker leader, takeover when it dies', async () => {
  t = await startTiered({ horizon: '1h', workers: { lease: LEASE } });
  second = new ProxyServer({
    bin: t.bin,
    configPath: path.join(t.dir, 'proxy2.yaml'),
    configFor: (port) => t.configFor(port),
    name: 'halocline proxy B',
  });
  await second.start(0);
  const first = t.proxy;

  // Exactly one leader (the first one up may keep it; either is fine).
  const roles = await waitUntil('one leader and one standby', async () => {
    const r = [await role(first), await role(second)].sort();
    return r[0] === 'leader' && r[1] === 'standby' ? r : null;
  }, { timeoutMs: 30_000 });
  assert.deepEqual(roles, ['leader', 'standby']);

  // A driver given both proxies treats them as mongos routers and works through either.
  const both = new MongoClient(`mongodb://127.0.0.1:${first.port},127.0.0.1:${second.port}/`, {
    serverSelectionTimeoutMS: 10_000,
  });
  try {
    const orders = both.db('shop').collection('orders');
    const now = Date.now();
    await orders.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: i, date: new Date(now - i * 1000), v: i })));
    await orders.updateOne({ _id: 3 }, { $inc: { v: 100 } });
    assert.equal((await orders.findOne({ _id: 3 })).v, 103);
    assert.equal(await orders.countDocuments({ date: { $gte: new Date(now - 60_000) } }), 20);
    const hello = await both.db('admin').command({ hello: 1 });
    assert.equal(hello.msg, 'isdbgrid');
  } finally {
    await both.close();
  }

  // Kill -9 the leader: the standby takes the lease over within the lease time
  // (plus one renewal period), and its feeder carries on.
  const leader = (await role(first)) === 'leader' ? first : second;
  const survivor = leader === first ? second : first;
  const killedAt = Date.now();
  await leader.kill();
  await waitUntil('the standby becomes the leader', async () => (await role(survivor)) === 'leader', {
    timeoutMs: 20_000,
  });
  const takeoverMs = Date.now() - killedAt;
  process.stdout.write(`# takeover: the standby led ${takeoverMs} ms after kill -9 of the leader (lease ${durationMs(LEASE)} ms)\n`);
  // The lease runs out at most LEASE after its last renewal, and the standby tries
  // every third of LEASE; the rest is slack for the polling and a loaded machine.
  assert.ok(takeoverMs <= durationMs(LEASE) * 2 + 5000, `takeover took ${takeoverMs} ms`);
  const c = new MongoClient(survivor.uri(), { serverSelectionTimeoutMS: 10_000 });
  try {
    const orders = c.db('shop').collection('orders');
    await orders.insertOne({ _id: 'after-takeover', date: new Date(), v: 1 });
    // The new leader's feeder brings the write to the archive.
    const archive = new MongoClient(t.archiveUri(), { serverSelectionTimeoutMS: 10_000 });
    try {
      await waitUntil('the write reaches the archive', async () =>
        archive.db('shop').collection('orders').findOne({ _id: 'after-takeover' }), { timeoutMs: 20_000 });
      const a = await archive.db('shop').collection('orders').findOne({ _id: 3 });
      assert.equal(a.v, 103);
    } finally {
      await archive.close();
    }
  } finally {
    await c.close();
  }
});

test('a leader paused longer than half its lease (SIGSTOP) runs its workers again once it resumes', async () => {
  // A process frozen by the host (a VM pause, a debugger, SIGSTOP) comes back to a work
  // window that closed while it slept. Its first renewal succeeds (no other proxy took
  // the lease), and every worker, the feeder included, must run again.
  const p = await startTiered({ horizon: '1h', workers: { lease: LEASE } });
  try {
    const orders = (await p.client()).db('shop').collection('orders');
    const archive = (await p.directClient('archive')).db('shop').collection('orders');
    await waitUntil('the proxy leads', async () => (await role(p.proxy)) === 'leader', { timeoutMs: 30_000 });
    for (let round = 0; round < 3; round++) {
      await orders.insertOne({ _id: `before-${round}`, date: new Date(), v: round });
      await p.waitFeederCaughtUp();
      // The fault: frozen for 1.5x the lease, well past the 1 s work window.
      process.kill(p.proxy.proc.pid, 'SIGSTOP');
      await new Promise((r) => setTimeout(r, 3000));
      process.kill(p.proxy.proc.pid, 'SIGCONT');
      await orders.insertOne({ _id: `after-${round}`, date: new Date(), v: round });
      await waitUntil(`round ${round}: the write after the pause reaches the archive`, async () =>
        archive.findOne({ _id: `after-${round}` }), { timeoutMs: 20_000 });
    }
    assert.equal((await role(p.proxy)), 'leader');
  } finally {
    await p.cleanup();
  }
});
