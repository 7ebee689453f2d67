'use strict';
// Entity map and entity creation for the unified test format (clients with command
// monitoring, databases, collections, sessions).

const { MongoClient, ReadPreference } = require('./driver');
const { unwrapNumber } = require('./match');

class SkipTest extends Error {
  constructor(reason) {
    super(reason);
    this.name = 'SkipTest';
  }
}

// Commands whose monitoring events the spec says to hide (security-sensitive ones).
const SENSITIVE = new Set([
  'authenticate',
  'saslstart',
  'saslcontinue',
  'getnonce',
  'createuser',
  'updateuser',
  'copydbgetnonce',
  'copydbsaslstart',
  'copydb',
]);

const COMMAND_EVENTS = {
  commandStartedEvent: 'commandStarted',
  commandSucceededEvent: 'commandSucceeded',
  commandFailedEvent: 'commandFailed',
};

function readPreference(rp) {
  if (!rp) return undefined;
  if (typeof rp === 'string') return new ReadPreference(rp);
  return new ReadPreference(rp.mode, rp.tagSets, {
    maxStalenessSeconds: rp.maxStalenessSeconds,
    hedge: rp.hedge,
  });
}

/** Converts unified-format collection/database options into Node driver options. */
function driverOptions(o = {}) {
  const out = {};
  for (const [k, v] of Object.entries(o)) {
    if (k === 'readPreference') out.readPreference = readPreference(v);
    else if (k === 'readConcern') out.readConcern = v;
    else if (k === 'writeConcern') out.writeConcern = v;
    else if (k === 'timeoutMS') out.timeoutMS = unwrapNumber(v);
    else throw new SkipTest(`unsupported collection/database option ${k}`);
  }
  return out;
}

/**
 * Transaction options as the driver takes them: maxCommitTimeMS a plain number (the
 * driver sends it as the commit's maxTimeMS only if `typeof` says number; a typed Int32
 * from the test file was dropped without a word).
 */
function transactionOptions(o = {}) {
  const out = { ...o };
  if (out.maxCommitTimeMS !== undefined) out.maxCommitTimeMS = unwrapNumber(out.maxCommitTimeMS);
  return out;
}

class EntityMap extends Map {
  set(key, value) {
    if (this.has(key)) throw new Error(`entity ${key} already exists`);
    return super.set(key, value);
  }
  get(key) {
    if (!this.has(key)) throw new Error(`no entity named ${key}`);
    return super.get(key);
  }
  getTyped(key, kind) {
    const v = this.get(key);
    if (!v || v.__kind !== kind) throw new Error(`entity ${key} is not a ${kind}`);
    return v;
  }
}

function uriWithOptions(baseUri, uriOptions = {}) {
  const u = new URL(baseUri);
  for (const [k, raw] of Object.entries(uriOptions)) {
    const v = unwrapNumber(raw);
    if (v !== null && typeof v === 'object') {
      if (k === 'readConcernLevel' || k === 'w') u.searchParams.set(k, String(v.valueOf()));
      else throw new SkipTest(`unsupported uriOption ${k}`);
    } else {
      u.searchParams.set(k, String(v));
    }
  }
  return u.toString();
}

/**
 * The event with its command's readConcern and writeConcern copied as they were sent.
 * The driver hands every command of a client the same readConcern object and later
 * adds afterClusterTime to it for a causally consistent read, which would show up,
 * after the fact, in the events of commands sent before.
 */
function snapshotConcerns(ev) {
  const c = ev.command;
  if (!c || typeof c !== 'object') return ev;
  for (const k of ['readConcern', 'writeConcern']) {
    if (c[k] && typeof c[k] === 'object' && !Array.isArray(c[k])) ev.command = { ...ev.command, [k]: { ...c[k] } };
  }
  return ev;
}

/**
 * Creates one entity described by `desc` ({client: {...}} etc.) into `entities`.
 * ctx: {uri, topology, clients: [] (for closing)}.
 */
async function createEntity(desc, entities, ctx) {
  const [type, spec] = Object.entries(desc)[0];
  switch (type) {
    case 'client': {
      if (spec.storeEventsAsEntities) throw new SkipTest('storeEventsAsEntities not implemented');
      if (spec.autoEncryptOpts) throw new SkipTest('client-side encryption not implemented');
      const observe = new Set(spec.observeEvents || []);
      for (const e of observe) {
        if (!(e in COMMAND_EVENTS)) throw new SkipTest(`observing ${e} not implemented`);
      }
      const ignore = new Set((spec.ignoreCommandMonitoringEvents || []).map((s) => s.toLowerCase()));
      const options = { serverSelectionTimeoutMS: 10_000, monitorCommands: true };
      if (spec.serverApi) options.serverApi = { version: spec.serverApi.version, strict: spec.serverApi.strict, deprecationErrors: spec.serverApi.deprecationErrors };
      const uriOptions = { ...(spec.uriOptions || {}) };
      // Speed up SDAM recovery after fail points, as the spec allows.
      if (!('heartbeatFrequencyMS' in uriOptions)) uriOptions.heartbeatFrequencyMS = 500;
      const client = new MongoClient(uriWithOptions(ctx.uri, uriOptions), options);
      client.__kind = 'client';
      client.__events = [];
      client.__recording = true;
      client.__failPointCommands = new Set();
      for (const [specName, nodeName] of Object.entries(COMMAND_EVENTS)) {
        client.on(nodeName, (ev) => {
          if (!client.__recording) return;
          const name = String(ev.commandName || '').toLowerCase();
          if (name === 'configurefailpoint') return;
          if (SENSITIVE.has(name) && !spec.observeSensitiveCommands) return;
          if ((name === 'hello' || name === 'ismaster') && ev.command && Object.keys(ev.command).length === 0) return;
          if (ignore.has(name)) return;
          // commandStarted for the internal lsid/lookups: keep everything else.
          if (observe.has(specName)) client.__events.push({ type: specName, event: snapshotConcerns(ev) });
          // lsid of every started command, for assertSameLsidOnLastTwoCommands.
          if (nodeName === 'commandStarted') (client.__lsids ||= []).push(ev.command && ev.command.lsid);
        });
      }
      ctx.clients.push(client);
      await client.connect();
      entities.set(spec.id, client);
      return;
    }
    case 'database': {
      const client = entities.getTyped(spec.client, 'client');
      const db = client.db(spec.databaseName, driverOptions(spec.databaseOptions));
      db.__kind = 'database';
      db.__client = client;
      entities.set(spec.id, db);
      return;
    }
    case 'collection': {
      const db = entities.getTyped(spec.database, 'database');
      const coll = db.collection(spec.collectionName, driverOptions(spec.collectionOptions));
      coll.__kind = 'collection';
      coll.__client = db.__client;
      coll.__db = db;
      entities.set(spec.id, coll);
      return;
    }
    case 'session': {
      const client = entities.getTyped(spec.client, 'client');
      const opts = { ...(spec.sessionOptions || {}) };
      if (opts.defaultTransactionOptions) opts.defaultTransactionOptions = transactionOptions(opts.defaultTransactionOptions);
      const session = client.startSession(opts);
      session.__kind = 'session';
      session.__client = client;
      session.__lsid = session.id; // the server session id document {id: UUID}
      ctx.sessions.push(session);
      entities.set(spec.id, session);
      return;
    }
    default:
      throw new SkipTest(`entity type ${type} not implemented`);
  }
}

module.exports = { EntityMap, createEntity, SkipTest, readPreference, driverOptions, transactionOptions, COMMAND_EVENTS };
