'use strict';
// Concurrent transactions on a tiered collection while the evictor and the warmer move its
// documents (docs/CONSISTENCY.md, Transactions): clients move money between accounts that
// start in the archive only, each transfer a transaction that reads both balances and
// writes both. Every account is older than the 2-second horizon, so the evictor removes
// each copy as soon as the feeder has written it back, and later transactions must copy
// it up again (the test waits, between two rounds of transfers, until the evictor has
// removed most accounts from the fast tier). Snapshot isolation and atomicity mean: the total never changes, inside any
// transaction or after; no balance goes negative; and each account ends at its opening
// balance plus the committed transfers the clients recorded.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startTiered, waitUntil, show } = require('../lib/tiered');

const ACCOUNTS = 12;
const OPENING = 100;
const CLIENTS = 4;
const TRANSFERS = Number(process.env.HALO_BANK_TRANSFERS || 25); // per client
const OLD = new Date(Date.now() - 400 * 86_400_000);
let t;

before(async () => {
  t = await startTiered({
    collections: ['bank.accounts'], horizon: '2s', guard: '500ms', startProxy: false,
    workers: { evictor: { interval: '100ms' }, warmer: { interval: '200ms', batchSize: 50 } },
  });
  const archive = await t.tierClient('archive');
  const docs = Array.from({ length: ACCOUNTS }, (_, i) => ({ _id: i, date: OLD, balance: OPENING }));
  await archive.db('bank').collection('accounts').insertMany(docs);
  await t.startProxy();
  await t.waitHealthy();
});

after(async () => {
  if (t) await t.cleanup();
});

// A deterministic generator per client, so a failure can be replayed.
function rng(seed) {
  let s = seed >>> 0;
  return (n) => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return Math.floor((s / 2 ** 32) * n);
  };
}

test('concurrent transfers keep the total, never go negative, and end where the committed transfers say', { timeout: 300_000 }, async () => {
  const net = new Array(ACCOUNTS).fill(0);
  const totalsSeen = [];
  let attempts = 0;
  let committed = 0;
  const clients = [];
  for (let w = 0; w < CLIENTS; w++) clients.push(await t.client({ maxPoolSize: 2 }));
  const picks = clients.map((_, w) => rng(20261204 + w));
  const evicted = async () => (await t.status()).coll('bank.accounts').evicted;
  for (let round = 0; round < 2; round++) {
    if (round > 0) {
      // Most accounts back in the archive only: the next transfers must copy them up again.
      const before = await evicted();
      await waitUntil('the evictor to remove most accounts from the fast tier', async () => (await evicted()) - before >= ACCOUNTS / 2, {
        timeoutMs: 60_000,
      });
    }
    await transfers(round);
  }
  async function transfers(round) {
    await Promise.all(
      clients.map(async (client, w) => {
        const accounts = client.db('bank').collection('accounts');
        const pick = picks[w];
        for (let i = 0; i < TRANSFERS; i++) {
          const from = pick(ACCOUNTS);
          const to = (from + 1 + pick(ACCOUNTS - 1)) % ACCOUNTS;
          const amount = 1 + pick(30);
          const session = client.startSession();
          let moved = false;
          try {
            await session.withTransaction(async () => {
              attempts++;
              moved = false;
              // Both accounts in the first statement, then the writes.
              const both = await accounts.find({ _id: { $in: [from, to] } }, { session }).toArray();
              assert.equal(both.length, 2, `transfer ${round}/${w}/${i} saw ${show(both)}`);
              const a = both.find((d) => d._id === from);
              if (a.balance < amount) return;
              await accounts.updateOne({ _id: from }, { $inc: { balance: -amount } }, { session });
              await accounts.updateOne({ _id: to }, { $inc: { balance: amount } }, { session });
              moved = true;
            });
          } finally {
            await session.endSession();
          }
          if (moved) {
            committed++;
            net[from] -= amount;
            net[to] += amount;
          }
          // A whole-collection read in a transaction: the total at one snapshot.
          if (i % 5 === 4) {
            const s2 = client.startSession();
            try {
              await s2.withTransaction(async () => {
                const all = await accounts.find({}, { session: s2 }).toArray();
                totalsSeen.push([all.length, all.reduce((x, d) => x + d.balance, 0)]);
              });
            } finally {
              await s2.endSession();
            }
          }
        }
      }),
    );
  }
  const accounts = (await t.client()).db('bank').collection('accounts');
  const final = await accounts.find().sort({ _id: 1 }).toArray();
  assert.equal(final.length, ACCOUNTS);
  for (const d of final) {
    assert.ok(d.balance >= 0, `negative balance: ${show(d)}`);
    assert.equal(d.balance, OPENING + net[d._id], `account ${d._id}: ${show(final)} vs net ${show(net)}`);
  }
  for (const [n, total] of totalsSeen) assert.deepEqual([n, total], [ACCOUNTS, ACCOUNTS * OPENING], show(totalsSeen));
  // The archive converges to the same balances once the feeder caught up.
  await t.waitFeederCaughtUp();
  const archived = await t.tierDocs('archive', 'bank.accounts');
  assert.deepEqual(archived.map((d) => d.balance), final.map((d) => d.balance));
  const status = (await t.status()).coll('bank.accounts');
  assert.ok(status.evicted > 0, `the evictor evicted nothing: ${show(status)}`);
  process.stdout.write(
    `# bank: ${committed} transfers committed in ${attempts} attempts, ${totalsSeen.length} snapshot totals, evicted ${status.evicted}\n`,
  );
});
