'use strict';
// The feeder is never poisoned by one document (issue 13, item 6): a document with a
// top-level $-prefixed field reaches the archive byte for byte; a document the archive
// refuses (here: a unique index only the archive has) stays in the fast tier, is named in
// haloclineStatus, makes archive reads that could include it fail with an error naming it,
// and does not hold up any other document. Correcting it through the proxy resolves it.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { BSON } = require('mongodb');
const { startTiered, waitUntil, show } = require('../lib/tiered');
const { expectServerError } = require('../lib/fixture');

const NS = 'shop.orders';
let t;

before(async () => {
  t = await startTiered({ collections: [NS], horizon: '1h', guard: '1s' });
  await t.waitHealthy();
});
after(async () => {
  if (t) await t.cleanup();
});

test('one refused document among 1,000 writes stops nothing; it is named, guarded and resolvable', async () => {
  const archive = (await t.directClient('archive')).db('shop').collection('orders');
  // An index only the archive has (created after the proxy set the fast tier up), and an
  // old archive-only document holding the key that the clash will collide with.
  await archive.createIndex({ sku: 1 }, { unique: true, sparse: true });
  await archive.insertOne({ _id: 'archive-only', sku: 'X', date: new Date(Date.now() - 10 * 86400_000) });

  const client = await t.client();
  const orders = client.db('shop').collection('orders');
  const now = Date.now();
  const doc = (i) => ({ _id: i, date: new Date(now - i), v: i });
  await orders.insertMany(Array.from({ length: 500 }, (_, i) => doc(i)));
  // Field names a replacement cannot hold, and dotted ones.
  const dollar = { _id: 'dollar', date: new Date(now), $price: 5, 'a.b': 1, nested: { $x: 1 } };
  await orders.insertOne(dollar);
  await orders.insertOne({ _id: 'clash', sku: 'X', date: new Date(now), v: -1 });
  await orders.insertMany(Array.from({ length: 500 }, (_, i) => doc(500 + i)));
  for (let i = 0; i < 1000; i += 100) await orders.updateOne({ _id: i }, { $set: { touched: true } });

  await t.waitFeederCaughtUp();
  // Every other document reached the archive; the $-prefixed one byte for byte.
  assert.equal(await archive.countDocuments({ v: { $gte: 0 } }), 1000);
  assert.equal(await archive.countDocuments({ touched: true }), 10);
  const fastDollar = await t.tierDocs('fast', NS, { _id: 'dollar' });
  const archiveDollar = await t.tierDocs('archive', NS, { _id: 'dollar' });
  assert.equal(archiveDollar.length, 1);
  assert.ok(Buffer.from(BSON.serialize(archiveDollar[0])).equals(Buffer.from(BSON.serialize(fastDollar[0]))), show(archiveDollar));
  assert.equal(await archive.countDocuments({ _id: 'clash' }), 0);

  // Named in haloclineStatus, with the archive's error.
  const status = await t.status();
  const refused = status.coll(NS).raw.refused;
  assert.ok(refused, show(status.raw));
  assert.equal(refused.count, 1);
  assert.equal(refused.documents[0]._id, 'clash');
  assert.equal(refused.documents[0].code, 11000, show(refused));

  // Archive-routed reads that wait for the feeder and could include it fail naming it;
  // others succeed at once. A merged read answers it from the fast tier.
  assert.deepEqual((await orders.find({ v: { $lt: 0 } }).toArray()).map((d) => d._id), ['clash']);
  const err = await expectServerError(orders.find({ v: { $lt: 0 } }).collation({ locale: 'en' }).toArray(), 96);
  assert.match(err.message, /"_id" : "clash"/);
  assert.match(err.message, /code 11000/);
  await expectServerError(orders.countDocuments({}), 96);
  assert.equal(await orders.countDocuments({ v: { $gte: 0 } }), 1000);
  // An exact _id lookup is answered by the fast tier, which holds it.
  assert.equal((await orders.findOne({ _id: 'clash' })).v, -1);

  // The way out: correct the document through the proxy.
  await orders.updateOne({ _id: 'clash' }, { $set: { sku: 'Y' } });
  await waitUntil('the refusal to clear', async () => !(await t.status()).coll(NS).raw.refused, {
    detail: async () => show((await t.status()).raw),
  });
  assert.equal((await archive.findOne({ _id: 'clash' })).sku, 'Y');
  assert.equal(await orders.countDocuments({ v: { $lt: 0 } }), 1);
});
