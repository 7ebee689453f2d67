'use strict';
// node:test fixture: one `halocline store` per test file, one connected MongoClient, and a
// fresh collection name per test. Registers before/after hooks at the file's top level.

const { before, after } = require('node:test');
const { MongoClient } = require('mongodb');
const { startStore } = require('./server');

const CLIENT_DEFAULTS = { serverSelectionTimeoutMS: 10_000, connectTimeoutMS: 10_000, socketTimeoutMS: 60_000 };

/**
 * useStore({dbName, uriParams, clientOptions, storeOptions, setup}) -> ctx
 *  setup(ctx)  optional async per-file setup, run once the client is connected
 *  ctx.server  StoreServer
 *  ctx.client  connected MongoClient (monitorCommands on; ctx.events collects started/succeeded/failed)
 *  ctx.db      client.db(dbName)
 *  ctx.coll(prefix)  a new, never-used collection handle
 *  ctx.newClient(params, options) another MongoClient closed in after()
 */
function useStore({ dbName = 'halo_test', uriParams = {}, clientOptions = {}, storeOptions = {}, setup } = {}) {
  const ctx = { events: [], extraClients: [] };
  let counter = 0;
  before(async () => {
    ctx.server = await startStore(storeOptions);
    ctx.client = new MongoClient(ctx.server.uri(uriParams), {
      ...CLIENT_DEFAULTS,
      monitorCommands: true,
      ...clientOptions,
    });
    for (const kind of ['commandStarted', 'commandSucceeded', 'commandFailed']) {
      ctx.client.on(kind, (e) => ctx.events.push({ kind, e }));
    }
    await ctx.client.connect();
    ctx.db = ctx.client.db(dbName);
    // Per-file setup runs here: a second top-level before() is not ordered after this one.
    if (setup) await setup(ctx);
  });
  after(async () => {
    const errors = [];
    for (const c of [ctx.client, ...ctx.extraClients]) {
      try {
        if (c) await c.close();
      } catch (e) {
        errors.push(e);
      }
    }
    try {
      if (ctx.server) await ctx.server.cleanup();
    } catch (e) {
      errors.push(e);
    }
    if (errors.length) throw errors[0];
  });
  ctx.collName = (prefix = 'c') => `${prefix}_${++counter}_${process.pid}`;
  ctx.coll = (prefix) => ctx.db.collection(ctx.collName(prefix));
  ctx.newClient = async (params = {}, options = {}) => {
    const c = new MongoClient(ctx.server.uri(params), { ...CLIENT_DEFAULTS, ...options });
    ctx.extraClients.push(c);
    await c.connect();
    return c;
  };
  /** Command-started events for `name` since `mark` (an index into ctx.events). */
  ctx.started = (name, mark = 0) =>
    ctx.events.slice(mark).filter((x) => x.kind === 'commandStarted' && x.e.commandName === name).map((x) => x.e);
  ctx.succeeded = (name, mark = 0) =>
    ctx.events.slice(mark).filter((x) => x.kind === 'commandSucceeded' && x.e.commandName === name).map((x) => x.e);
  return ctx;
}

/**
 * Awaits `promiseOrFn` and asserts it rejects with a server error of the given code
 * (and codeName, when given). Returns the error for further checks.
 */
async function expectServerError(promiseOrFn, code, codeName) {
  const assert = require('node:assert/strict');
  const p = typeof promiseOrFn === 'function' ? promiseOrFn() : promiseOrFn;
  let err = null;
  try {
    await p;
  } catch (e) {
    err = e;
  }
  assert.ok(err, `expected server error code ${code}${codeName ? ` (${codeName})` : ''}, but the operation succeeded`);
  assert.equal(err.code, code, `expected code ${code}, got ${err.code} (${err.codeName}): ${err.message}`);
  if (codeName) assert.equal(err.codeName, codeName, `expected codeName ${codeName}: ${err.message}`);
  return err;
}

/**
 * Number of documents matching `filter`, counted with find (not countDocuments, which is an
 * aggregate): tests that are not about counting should not fail for want of aggregate.
 */
async function countByFind(coll, filter = {}) {
  return (await coll.find(filter, { projection: { _id: 1 } }).toArray()).length;
}

module.exports = { useStore, expectServerError, countByFind, CLIENT_DEFAULTS };
