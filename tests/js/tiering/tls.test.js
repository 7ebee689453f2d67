'use strict';
// TLS end to end through the tiering system. Both tier stores run --tlsMode requireTLS; the
// proxy reaches them with tls=true&tlsCAFile=... in its tier URIs (primary discovery, the
// pooled connections, the workers), and serves its own clients with net.tls requireTLS.
// CRUD, routing to each tier, the warmer and the feeder all work over TLS; a plain client
// is refused; tier URIs that do not trust the tiers' certificate, or whose host the
// certificate does not name, stop the proxy at start with an error naming tiers.<name>.uri;
// tiers that require a client certificate get the one in tlsCertificateKeyFile.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const { startTiered, show, waitUntil } = require('../lib/tiered');
const { makeCerts } = require('../lib/certs');

const NS = 'shop.orders';
const OLD = new Date(Date.now() - 400 * 86_400_000);

let certs;
let t;

before(async () => {
  certs = makeCerts();
  t = await startTiered({ collections: [NS], horizon: '10m', guard: '1s', startProxy: false, tls: { certs } });
  // Seeded straight into the archive, over TLS: old documents, and recent ones for the warmer.
  const archive = await t.tierClient('archive');
  const docs = [];
  for (let i = 0; i < 20; i++) {
    const date = i % 2 ? new Date(Date.now() - 60_000 - i * 1000) : new Date(OLD.getTime() + i * 1000);
    docs.push({ _id: i, date, v: i });
  }
  await archive.db('shop').collection('orders').insertMany(docs);
  await t.startProxy();
  await t.waitHealthy();
  await t.waitWarmDone(NS);
});
after(async () => {
  if (t) await t.cleanup();
});

test('over TLS: the warmer, CRUD through the proxy, routing to each tier, and the feeder', async () => {
  // The warmer copied the recent archive documents up (archive -> fast, both over TLS).
  const warmed = (await t.tierDocs('fast', NS)).map((d) => d._id);
  assert.deepEqual(warmed, [1, 3, 5, 7, 9, 11, 13, 15, 17, 19]);

  const client = await t.client();
  const orders = client.db('shop').collection('orders');
  const now = Date.now();
  await orders.insertMany([
    { _id: 100, date: new Date(now), v: 100 },
    { _id: 101, date: new Date(now), v: 101 },
  ]);
  assert.equal((await orders.updateOne({ _id: 101 }, { $set: { v: -1 } })).modifiedCount, 1);
  // A write on an archive-only document promotes it first.
  assert.equal((await orders.updateOne({ _id: 0 }, { $set: { touched: true } })).modifiedCount, 1);
  assert.equal((await orders.deleteOne({ _id: 2 })).deletedCount, 1);

  const before = await t.status();
  const recentQuery = { date: { $gte: new Date(now - 5 * 60_000) } };
  assert.equal((await t.explain({ find: 'orders', filter: recentQuery })).tier, 'fast');
  assert.equal((await t.explain({ find: 'orders', filter: {} })).tier, 'archive');
  const recent = await orders.find(recentQuery).sort({ _id: 1 }).toArray();
  assert.deepEqual(recent.map((d) => d._id), [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 100, 101]);
  const all = await orders.find({}).sort({ _id: 1 }).toArray();
  assert.equal(all.length, 21, show(all.map((d) => d._id)));
  assert.equal(all.find((d) => d._id === 0).touched, true);
  assert.equal(all.find((d) => d._id === 101).v, -1);
  assert.ok(!all.some((d) => d._id === 2), 'the deleted document stays deleted');
  const afterReads = await t.status();
  assert.ok(afterReads.routing.fast > before.routing.fast, show(afterReads.raw.routing));
  assert.ok(afterReads.routing.archive > before.routing.archive, show(afterReads.raw.routing));

  // The feeder (a change stream on the fast tier, writes to the archive) carried every write.
  await t.waitFeederCaughtUp();
  const archived = await t.tierDocs('archive', NS);
  const byId = new Map(archived.map((d) => [d._id, d]));
  assert.equal(byId.get(100).v, 100);
  assert.equal(byId.get(101).v, -1);
  assert.equal(byId.get(0).touched, true);
  assert.ok(!byId.has(2), 'the delete reached the archive');
});

test("a plain client is refused by the proxy's requireTLS listener", async () => {
  const plain = new MongoClient(t.uri(), { serverSelectionTimeoutMS: 2_000, connectTimeoutMS: 2_000 });
  try {
    await assert.rejects(plain.db('admin').command({ ping: 1 }), /Server selection timed out|closed|ECONNRESET/);
  } finally {
    await plain.close(true);
  }
  // A TLS client that does not trust the proxy's CA is refused too.
  const untrusting = new MongoClient(t.uri(), {
    tls: true,
    tlsCAFile: certs.otherCaFile,
    serverSelectionTimeoutMS: 2_000,
  });
  try {
    await assert.rejects(untrusting.db('admin').command({ ping: 1 }));
  } finally {
    await untrusting.close(true);
  }
});

/** startProxy() must fail; returns the error (its message holds the proxy's last log lines). */
async function startFails(d) {
  const started = Date.now();
  let err = null;
  try {
    await d.startProxy();
  } catch (e) {
    err = e;
  }
  assert.ok(err, 'the proxy started although it cannot verify the tiers');
  // Refused at once, not after the 30 s wait for unreachable tiers.
  assert.ok(Date.now() - started < 25_000, `took ${Date.now() - started} ms`);
  return err;
}

test("tier URIs whose tlsCAFile does not trust the tiers' certificate stop the proxy at start", async () => {
  const d = await startTiered({
    collections: [NS],
    startProxy: false,
    tls: { certs, proxy: false, tierUriParams: { tlsCAFile: certs.otherCaFile } },
  });
  try {
    const err = await startFails(d);
    assert.match(
      err.message,
      /tiers\.(fast|archive)\.uri: TLS handshake with 127\.0\.0\.1:\d+ failed: certificate verify failed/,
    );
  } finally {
    await d.cleanup();
  }
});

test('a tier certificate that does not name the host fails; tlsAllowInvalidHostnames accepts it', async () => {
  const d = await startTiered({
    collections: [NS],
    startProxy: false,
    tls: { certs, proxy: false, tierPem: certs.wrongHostPem },
  });
  try {
    const err = await startFails(d);
    assert.match(err.message, /tiers\.(fast|archive)\.uri: TLS handshake with 127\.0\.0\.1:\d+ failed: certificate verify failed: IP address mismatch/);
    d.tls.tierUriParams = { tlsAllowInvalidHostnames: 'true' };
    await d.startProxy();
    await d.waitHealthy();
    const orders = (await d.client()).db('shop').collection('orders');
    await orders.insertOne({ _id: 'x', date: new Date() });
    assert.equal((await orders.findOne({ _id: 'x' }))._id, 'x');
  } finally {
    await d.cleanup();
  }
});

test('tiers that require client certificates: refused without tlsCertificateKeyFile, served with it', async () => {
  const d = await startTiered({
    collections: [NS],
    startProxy: false,
    tls: { certs, proxy: false, clientCerts: true, tierUriParams: { tlsCertificateKeyFile: undefined } },
  });
  try {
    const err = await startFails(d);
    assert.match(err.message, /tiers\.(fast|archive)\.uri: TLS (handshake with 127\.0\.0\.1:\d+|connection to the \w+ tier) failed/);
    d.tls.tierUriParams = {};
    await d.startProxy();
    await d.waitHealthy();
    const orders = (await d.client()).db('shop').collection('orders');
    await orders.insertOne({ _id: 'y', date: new Date() });
    await d.waitFeederCaughtUp();
    assert.deepEqual((await d.tierDocs('archive', NS)).map((x) => x._id), ['y']);
  } finally {
    await d.cleanup();
  }
});

test('MONGODB-X509: a client certificate logs in through the proxy as the $external user its subject names', async () => {
  const d = await startTiered({
    collections: [NS],
    auth: true,
    tls: { certs, tiers: false, proxy: true },
    extra: {
      net: { tls: { CAFile: certs.caFile, allowConnectionsWithoutCertificates: true } },
      security: { userCacheInvalidationIntervalSecs: 1 },
    },
  });
  try {
    const archive = await d.tierClient('archive');
    await archive.db('$external').command({ createUser: 'CN=halocline-test-client', roles: [{ role: 'read', db: 'shop' }] });
    await (await d.client()).db('shop').collection('orders').insertOne({ _id: 'x', date: new Date() });
    const x509 = new MongoClient(d.uri(), {
      ...d.clientTls('proxy'),
      tlsCertificateKeyFile: certs.clientPem,
      authMechanism: 'MONGODB-X509',
      serverSelectionTimeoutMS: 10_000,
    });
    try {
      await x509.connect();
      const status = await x509.db('admin').command({ connectionStatus: 1 });
      assert.deepEqual(status.authInfo.authenticatedUsers, [{ user: 'CN=halocline-test-client', db: '$external' }], show(status));
      assert.equal(await x509.db('shop').collection('orders').countDocuments({}), 1);
      await assert.rejects(x509.db('shop').collection('orders').insertOne({ _id: 'y', date: new Date() }), (e) => e.code === 13);
    } finally {
      await x509.close();
    }
    // Once its user is dropped (and the proxy's user cache refreshed, within
    // userCacheInvalidationIntervalSecs), the certificate no longer logs in.
    await archive.db('$external').command({ dropUser: 'CN=halocline-test-client' });
    await waitUntil('the dropped $external user to be refused', async () => {
      const stranger = new MongoClient(d.uri(), {
        ...d.clientTls('proxy'),
        tlsCertificateKeyFile: certs.clientPem,
        authMechanism: 'MONGODB-X509',
        serverSelectionTimeoutMS: 10_000,
      });
      try {
        await stranger.connect();
        return false;
      } catch (e) {
        assert.ok(e.code === 11 || e.code === 18 || /Could not find user|Authentication failed/.test(e.message), e.message);
        return true;
      } finally {
        await stranger.close();
      }
    });
  } finally {
    await d.cleanup();
  }
});
