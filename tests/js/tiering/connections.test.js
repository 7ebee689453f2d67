'use strict';
// Connections under pressure, for the store and the proxy alike (issue: reliability):
//  - a storm of 2,000 concurrent connections, each doing a handshake and a ping, then
//    half of them dropped abruptly; the server keeps serving, and the resident memory
//    each idle connection costs is printed (docs/OPERATIONS.md quotes it);
//  - net.maxIncomingConnections (mongod's name; --maxConns on the store): a connection
//    beyond the limit is closed at once and counted, and one is accepted again when
//    another leaves;
//  - a client that sends half a frame and stalls, or never reads its replies, does not
//    hold up anyone else.

const { test, before, after, describe } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const W = require('../lib/wire');
const { startStore } = require('../lib/server');
const { startTiered, waitUntil } = require('../lib/tiered');
// (No driver clients here: each would hold pooled and monitoring connections of its own.)

const STORM = 2000;
const hello = { hello: 1, $db: 'admin' };
const ping = { ping: 1, $db: 'admin' };

function rssKiB(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m[1]);
}

/** Opens n connections in waves, each answering hello and ping. */
async function openMany(port, n) {
  const conns = [];
  const wave = 200;
  for (let i = 0; i < n; i += wave) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(wave, n - i) }, async () => {
        const c = await W.RawConnection.connect(port);
        assert.equal((await c.command(hello)).ok, 1);
        assert.equal((await c.command(ping)).ok, 1);
        return c;
      }),
    );
    conns.push(...batch);
  }
  return conns;
}

/** The storm, then the abrupt half; returns the memory per idle connection (KiB). */
async function storm(port, pid, label) {
  const before = rssKiB(pid);
  const conns = await openMany(port, STORM);
  const during = rssKiB(pid);
  // Half leave without a goodbye (RST), the rest stay idle.
  for (let i = 0; i < conns.length; i += 2) conns[i].sock.resetAndDestroy();
  const survivors = conns.filter((_, i) => i % 2 === 1);
  // Everyone left still gets answers, and newcomers are served.
  for (const c of survivors.slice(0, 50)) assert.equal((await c.command(ping)).ok, 1);
  const fresh = await openMany(port, 20);
  for (const c of [...survivors, ...fresh]) c.destroy();
  const perConn = (during - before) / STORM;
  process.stdout.write(`# ${label}: ${STORM} connections, resident memory ${before} -> ${during} KiB: ${perConn.toFixed(1)} KiB per idle connection\n`);
  return perConn;
}

/**
 * A half frame and a reader that never reads must not hold up another client. The
 * reader asks for 4 MB replies (`coll` in `db` gets eight 512 KB documents) and leaves
 * them unread, so the server's writes to it back up.
 */
async function hostileClients(port, db, coll) {
  const setup = await W.RawConnection.connect(port);
  const docs = Array.from({ length: 8 }, (_, i) => ({ _id: i, pad: 'x'.repeat(512 * 1024) }));
  assert.equal((await setup.command({ insert: coll, documents: docs, $db: db })).ok, 1);
  setup.destroy();
  const stalled = await W.RawConnection.connect(port);
  const f = W.opMsg(ping);
  await stalled.send(f.subarray(0, 10)); // the length and part of the header, then nothing
  const hog = await W.RawConnection.connect(port);
  hog.sock.pause(); // never reads
  for (let i = 0; i < 64; i++) await hog.send(W.opMsg({ find: coll, filter: {}, $db: db }));
  const other = await W.RawConnection.connect(port);
  try {
    for (let i = 0; i < 20; i++) assert.equal((await other.command(ping)).ok, 1);
    assert.equal((await other.command({ find: coll, filter: { _id: 1 }, projection: { _id: 1 }, $db: db })).cursor.firstBatch.length, 1);
  } finally {
    for (const c of [stalled, hog, other]) c.destroy();
  }
}

/** With a limit of `max`, one more connection is closed at once; after one leaves, one comes in. */
async function limitHolds(port, max, rejected) {
  const conns = await openMany(port, max);
  const extra = await W.RawConnection.connect(port);
  const r = await extra.next(10_000);
  assert.ok(r.closed, 'the connection beyond the limit is closed without a reply');
  conns.pop().destroy();
  // The server sees the close asynchronously: a new connection is accepted once it has.
  await waitUntil('a connection to be accepted again below the limit', async () => {
    const c = await W.RawConnection.connect(port);
    try {
      await c.send(W.opMsg(ping));
      const reply = await c.next(10_000);
      return !reply.closed;
    } finally {
      c.destroy();
    }
  });
  for (const c of conns) c.destroy();
  // Those closes reach the server asynchronously too: until they have, the connection
  // that asks for the count may itself be one too many.
  const { n } = await waitUntil('a connection below the limit to answer with the count', async () => {
    try {
      return { n: await rejected() };
    } catch (e) {
      if (/connection closed/.test(e.message)) return false;
      throw e;
    }
  });
  assert.ok(n >= 1, `rejected connections counted: ${n}`);
}

describe('the store', () => {
  let server;
  before(async () => {
    server = await startStore();
  });
  after(async () => {
    if (server) await server.cleanup();
  });

  test(`a storm of ${STORM} connections, half dropped abruptly`, { timeout: 300_000 }, async () => {
    const perConn = await storm(server.port, server.proc.pid, 'store');
    assert.ok(perConn < 1024, `an idle connection costs ${perConn} KiB`);
  });

  test('a half frame and a client that never reads hold up nobody', { timeout: 120_000 }, async () => {
    await hostileClients(server.port, 'test', 'big');
  });

  test('--maxConns: one more connection is closed at once, counted in serverStatus', { timeout: 120_000 }, async () => {
    const limited = await startStore({ extraArgs: ['--maxConns', '5'] });
    try {
      await limitHolds(limited.port, 5, async () => {
        const c = await W.RawConnection.connect(limited.port);
        try {
          const s = await c.command({ serverStatus: 1, $db: 'admin' });
          return s.connections.rejected;
        } finally {
          c.destroy();
        }
      });
    } finally {
      await limited.cleanup();
    }
  });
});

describe('the proxy', () => {
  let t;
  before(async () => {
    t = await startTiered({ collections: ['shop.orders'], horizon: '1h' });
  });
  after(async () => {
    if (t) await t.cleanup();
  });

  test(`a storm of ${STORM} connections, half dropped abruptly`, { timeout: 300_000 }, async () => {
    const perConn = await storm(t.proxy.port, t.proxy.proc.pid, 'proxy');
    assert.ok(perConn < 1024, `an idle connection costs ${perConn} KiB`);
  });

  test('a half frame and a client that never reads hold up nobody', { timeout: 120_000 }, async () => {
    await hostileClients(t.proxy.port, 'shop', 'big'); // untiered: passed to the archive
  });

  test('net.maxIncomingConnections: one more connection is closed at once, counted in haloclineStatus', { timeout: 120_000 }, async () => {
    const t2 = await startTiered({
      collections: ['shop.orders'],
      horizon: '1h',
      workers: false,
      extra: { net: { maxIncomingConnections: 4 } },
    });
    try {
      await limitHolds(t2.proxy.port, 4, async () => {
        const c = await W.RawConnection.connect(t2.proxy.port);
        try {
          const s = await c.command({ haloclineStatus: 1, $db: 'admin' });
          return s.connections.rejected;
        } finally {
          c.destroy();
        }
      });
    } finally {
      await t2.cleanup();
    }
  });
});

/**
 * The keepalive timer of the server's end of an established connection from `clientPort`
 * to `serverPort`, in seconds, from /proc/net/tcp ("tr" 2 is the keepalive timer; its
 * expiry is in clock ticks of 100 Hz), or null when none runs.
 */
function serverKeepAliveSecs(serverPort, clientPort) {
  const hex = (n) => n.toString(16).toUpperCase().padStart(4, '0');
  for (const line of fs.readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 7) continue;
    const [, local, remote, state, , timer] = f;
    if (state !== '01' || !local.endsWith(`:${hex(serverPort)}`) || !remote.endsWith(`:${hex(clientPort)}`)) continue;
    const [tr, when] = timer.split(':');
    return tr === '02' ? parseInt(when, 16) / 100 : null;
  }
  return undefined;
}

test('an idle connection has TCP keepalive armed (300 s), so a vanished client is closed', async () => {
  const server = await startStore();
  try {
    const c = await W.RawConnection.connect(server.port);
    try {
      assert.equal((await c.command(ping)).ok, 1);
      const secs = serverKeepAliveSecs(server.port, c.sock.localPort);
      assert.ok(secs !== undefined, 'the connection is in /proc/net/tcp');
      assert.ok(secs !== null && secs > 200 && secs <= 300, `keepalive timer: ${secs} s`);
    } finally {
      c.destroy();
    }
  } finally {
    await server.cleanup();
  }
});
