#!/usr/bin/env node
'use strict';
// Runner for MongoDB's unified test format (JSON) against `halocline store`.
//
// Usage: node conformance/runner.js [options] [file-substring...]
//   --dir DIR          conformance root (default: $CONFORMANCE_DIR or <repo>/../shared/conformance)
//   --suite a,b        sub-directories to run (default: every sub-directory with .json files)
//   --baseline FILE    baseline JSON (default: conformance/baseline.json)
//   --only-baseline    run only the baseline files
//   --uri URI          use a running server instead of starting one
//   --replSet NAME     start the server with --replSet NAME (change streams, transactions)
//   --proxy            run through the tiering proxy instead: two stores (fast and archive
//                      replica sets) behind `halocline proxy`, with every collection the
//                      selected files name tiered (the second pass of issue 14)
//   --verbose          print every test's outcome, not only failures and skips
//   --test-timeout MS  per-test bound (default 60000)
// Output: one line per file, details of failures and skip reasons, one line per suite
// (pass rate, files fully passing), then a total line:
//   conformance: N passed, N failed, N skipped
// The server it starts runs with --setParameter enableTestCommands=1 (configureFailPoint).
// The baseline file also holds `known`: per file, the failing tests and why each fails
// ("*": every test of the file). Failures are tagged [known] with their reason; the end
// lists the UNEXPLAINED ones and the known ones that pass now. Neither changes the exit code.
// Exit code: 1 if a baseline file has a failure, a baseline test does not pass (a
// regression), or a baseline file cannot run; else 0.

const fs = require('node:fs');
const path = require('node:path');
const { EJSON } = require('./driver').BSON;
const { MongoClient, MongoServerError, MongoBulkWriteError, MongoOperationTimeoutError } = require('./driver');
const { startStore, REPO_ROOT } = require('../lib/server');
const { match, exactEqual, show, MatchError } = require('./match');
const { EntityMap, createEntity, SkipTest } = require('./entities');
const { handlerFor, IMPLEMENTED, ITERABLE_RESULTS, plainBulkResult } = require('./operations');

const SUPPORTED_SCHEMA = [1, 21]; // major 1, up to minor 21
const TEST_RUNNER_OPS = new Set([
  'failPoint',
  'targetedFailPoint',
  'assertSessionPinned',
  'assertSessionUnpinned',
  'assertCollectionExists',
  'assertCollectionNotExists',
  'assertIndexExists',
  'assertIndexNotExists',
  'assertSameLsidOnLastTwoCommands',
  'assertDifferentLsidOnLastTwoCommands',
  'createEntities',
  'assertSessionTransactionState',
  'assertSessionDirty',
  'assertSessionNotDirty',
]);

// ------------------------------------------------------------------ CLI

function parseArgs(argv) {
  const o = {
    dir: process.env.CONFORMANCE_DIR || path.resolve(REPO_ROOT, '..', 'shared', 'conformance'),
    suites: null,
    baseline: path.join(__dirname, 'baseline.json'),
    onlyBaseline: false,
    uri: null,
    replSet: process.env.CONFORMANCE_REPLSET || null,
    verbose: false,
    testTimeoutMs: 60_000,
    filters: [],
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--dir') o.dir = path.resolve(argv[++i]);
    else if (a === '--suite') o.suites = argv[++i].split(',');
    else if (a === '--baseline') o.baseline = path.resolve(argv[++i]);
    else if (a === '--only-baseline') o.onlyBaseline = true;
    else if (a === '--uri') o.uri = argv[++i];
    else if (a === '--replSet') o.replSet = argv[++i];
    else if (a === '--proxy') o.proxy = true;
    else if (a === '--verbose' || a === '-v') o.verbose = true;
    else if (a === '--test-timeout') o.testTimeoutMs = Number(argv[++i]);
    else if (a === '--help' || a === '-h') {
      console.log(fs.readFileSync(__filename, 'utf8').split('\n').slice(2, 17).join('\n'));
      process.exit(0);
    } else if (a.startsWith('--')) throw new Error(`unknown option ${a}`);
    else o.filters.push(a);
  }
  return o;
}

/**
 * The baseline: `files` that must have no failing test (and one passing), and
 * `tests`, per file, tests that must pass in files that cannot be listed whole.
 * Returns {files: [...], tests: {file: [description...]}}.
 */
function loadBaseline(file) {
  if (!fs.existsSync(file)) return { files: [], tests: {}, known: {} };
  const j = JSON.parse(fs.readFileSync(file, 'utf8'));
  if (Array.isArray(j)) return { files: j, tests: {}, known: {} };
  return { files: j.files || [], tests: j.tests || {}, known: j.known || {} };
}

/** Why a test is known to fail (the baseline's `known`, per file and test, or `*` for the whole file), or null. */
function knownReason(known, file, name) {
  const k = known[file];
  if (!k) return null;
  return k[name] || k['*'] || null;
}

function listFiles(opts) {
  if (!fs.existsSync(opts.dir)) throw new Error(`conformance dir not found: ${opts.dir}`);
  const suites =
    opts.suites ||
    fs
      .readdirSync(opts.dir, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name)
      .sort();
  const files = [];
  for (const s of suites) {
    const d = path.join(opts.dir, s);
    if (!fs.existsSync(d)) throw new Error(`suite not found: ${d}`);
    for (const f of fs.readdirSync(d).sort()) if (f.endsWith('.json')) files.push(`${s}/${f}`);
  }
  return files;
}

// ------------------------------------------------------------------ requirements

function versionTuple(v) {
  const parts = String(v).split('.').map((x) => parseInt(x, 10) || 0);
  while (parts.length < 3) parts.push(0);
  return parts.slice(0, 3);
}
function cmpVersion(a, b) {
  const x = versionTuple(a);
  const y = versionTuple(b);
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i] - y[i];
  return 0;
}

/** Returns null when `req` is met, else a reason string. */
function unmetRequirement(req, server) {
  if (req.minServerVersion && cmpVersion(server.version, req.minServerVersion) < 0) {
    return `needs server >= ${req.minServerVersion} (have ${server.version})`;
  }
  if (req.maxServerVersion && cmpVersion(server.version, req.maxServerVersion) > 0) {
    return `needs server <= ${req.maxServerVersion} (have ${server.version})`;
  }
  if (req.topologies) {
    const ok = req.topologies.includes(server.topology) || (server.topology === 'sharded' && req.topologies.includes('sharded-replicaset'));
    if (!ok) return `needs topology ${req.topologies.join('|')} (have ${server.topology})`;
  }
  if (req.serverless === 'require') return 'needs serverless';
  if (req.auth === true) return 'needs auth';
  if (req.authMechanism) return `needs auth mechanism ${req.authMechanism}`;
  if (req.csfle) return 'needs client-side encryption';
  if (req.serverParameters) {
    for (const [k, v] of Object.entries(req.serverParameters)) {
      const have = server.parameters[k];
      if (have === undefined || !exactEqual(v, have)) return `needs server parameter ${k}=${show(v)} (have ${show(have)})`;
    }
  }
  return null;
}

/** null if any alternative is met; else the reasons joined. */
function unmetRequirements(reqs, server) {
  if (!reqs || reqs.length === 0) return null;
  const reasons = [];
  for (const r of reqs) {
    const why = unmetRequirement(r, server);
    if (!why) return null;
    reasons.push(why);
  }
  return reasons.join('; or ');
}

// ------------------------------------------------------------------ static checks

function unsupportedOperation(ops) {
  for (const op of ops) {
    if (op.object === 'testRunner') {
      if (!TEST_RUNNER_OPS.has(op.name)) return `testRunner operation ${op.name} not implemented`;
      if (op.name === 'createEntities') continue;
    } else if (!IMPLEMENTED.has(op.name)) {
      return `operation ${op.name} not implemented by the runner`;
    }
    if (op.expectError && (op.expectError.writeErrors || op.expectError.writeConcernErrors)) {
      return 'expectError.writeErrors/writeConcernErrors (client bulk write) not implemented';
    }
  }
  return null;
}

// ------------------------------------------------------------------ test execution

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

class TestContext {
  constructor(runner) {
    this.runner = runner;
    this.uri = runner.uri;
    this.entities = new EntityMap();
    this.clients = [];
    this.sessions = [];
    this.cursors = [];
    this.failPoints = []; // {client, name}
  }

  async cleanup() {
    for (const c of this.cursors) await c.close().catch(() => {});
    for (const s of this.sessions) await s.endSession().catch(() => {});
    for (const fp of this.failPoints) {
      await fp.client
        .db('admin')
        .command({ configureFailPoint: fp.name, mode: 'off' })
        .catch(() => {});
    }
    for (const c of this.clients) await withTimeout(c.close(), 10_000, 'client.close').catch(() => c.close(true).catch(() => {}));
    await this.settle();
  }

  /**
   * Waits (at most 10 s) until no command of a session is still running on the server: a
   * command a blockConnection fail point held past the client's socketTimeoutMS goes on
   * after its client gave up, and would otherwise run during the next test and consume
   * that test's fail point (what the specification's killAllSessions between tests is
   * for). Servers without currentOp are not waited for.
   */
  async settle() {
    const internal = this.runner.internal;
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      let inprog;
      try {
        inprog = (await internal.db('admin').command({ currentOp: 1, active: true })).inprog || [];
      } catch {
        return;
      }
      const running = inprog.filter((o) => o.lsid && o.command && !('currentOp' in o.command) && !('hello' in o.command));
      if (!running.length) return;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

/** Client errors: anything not derived from a server reply (driver validation, network). */
function isClientError(err) {
  return !(err instanceof MongoServerError);
}

function checkExpectedError(expected, err, entities) {
  if (!err) throw new MatchError('expectError', `expected an error, but the operation succeeded`);
  const m = err.message || String(err);
  if (expected.isClientError === true && !isClientError(err)) {
    throw new MatchError('expectError.isClientError', `expected a client error, got ${err.name}: ${m}`);
  }
  if (expected.isClientError === false && isClientError(err)) {
    throw new MatchError('expectError.isClientError', `expected a server error, got ${err.name}: ${m}`);
  }
  if (expected.isTimeoutError !== undefined && expected.isTimeoutError !== err instanceof MongoOperationTimeoutError) {
    throw new MatchError('expectError.isTimeoutError', `got ${err.name}: ${m}`);
  }
  if (expected.errorContains !== undefined && !m.toLowerCase().includes(String(expected.errorContains).toLowerCase())) {
    throw new MatchError('expectError.errorContains', `"${expected.errorContains}" not in "${m}"`);
  }
  if (expected.errorCode !== undefined) {
    const want = Number(expected.errorCode.valueOf());
    if (err.code !== want) throw new MatchError('expectError.errorCode', `expected ${want}, got ${err.code} (${m})`);
  }
  if (expected.errorCodeName !== undefined && err.codeName !== expected.errorCodeName) {
    throw new MatchError('expectError.errorCodeName', `expected ${expected.errorCodeName}, got ${err.codeName} (${m})`);
  }
  for (const label of expected.errorLabelsContain || []) {
    if (!(typeof err.hasErrorLabel === 'function' && err.hasErrorLabel(label))) {
      throw new MatchError('expectError.errorLabelsContain', `missing label ${label}; have ${show(err.errorLabels)}`);
    }
  }
  for (const label of expected.errorLabelsOmit || []) {
    if (typeof err.hasErrorLabel === 'function' && err.hasErrorLabel(label)) {
      throw new MatchError('expectError.errorLabelsOmit', `unexpected label ${label}`);
    }
  }
  if (expected.errorResponse !== undefined) {
    match(expected.errorResponse, err.errorResponse, { root: true, entities, path: 'expectError.errorResponse' });
  }
  if (expected.expectResult !== undefined) {
    const partial = err instanceof MongoBulkWriteError ? plainBulkResult(err.result) : err.result;
    match(expected.expectResult, partial, { root: true, entities, path: 'expectError.expectResult' });
  }
}

async function runTestRunnerOp(op, ctx) {
  const a = op.arguments || {};
  const internal = ctx.runner.internal;
  switch (op.name) {
    case 'failPoint':
    case 'targetedFailPoint': {
      // targetedFailPoint: on the mongos the session's transaction is pinned to; the
      // deployments here have one mongos-like server (the proxy), the session's client's.
      const client = op.name === 'failPoint' ? ctx.entities.getTyped(a.client, 'client') : ctx.entities.getTyped(a.session, 'session').client;
      try {
        await client.db('admin').command(a.failPoint);
      } catch (e) {
        if (e.code === 59) throw new SkipTest('server has no configureFailPoint (test commands)');
        throw e;
      }
      ctx.failPoints.push({ client, name: a.failPoint.configureFailPoint });
      return;
    }
    case 'assertSessionPinned':
    case 'assertSessionUnpinned': {
      // A transaction on a sharded deployment is pinned to the mongos that ran its first
      // statement (the driver's session.isPinned).
      const session = ctx.entities.getTyped(a.session, 'session');
      if (Boolean(session.isPinned) !== (op.name === 'assertSessionPinned')) {
        throw new MatchError(op.name, `session.isPinned is ${session.isPinned}`);
      }
      return;
    }
    case 'assertCollectionExists':
    case 'assertCollectionNotExists': {
      const names = (await internal.db(a.databaseName).listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name);
      const exists = names.includes(a.collectionName);
      if (exists !== (op.name === 'assertCollectionExists')) {
        throw new MatchError(op.name, `${a.databaseName}.${a.collectionName} exists=${exists}`);
      }
      return;
    }
    case 'assertIndexExists':
    case 'assertIndexNotExists': {
      let names = [];
      try {
        names = (await internal.db(a.databaseName).collection(a.collectionName).listIndexes().toArray()).map((i) => i.name);
      } catch (e) {
        if (e.code !== 26) throw e;
      }
      const exists = names.includes(a.indexName);
      if (exists !== (op.name === 'assertIndexExists')) throw new MatchError(op.name, `index ${a.indexName} exists=${exists}`);
      return;
    }
    case 'assertSameLsidOnLastTwoCommands':
    case 'assertDifferentLsidOnLastTwoCommands': {
      const client = ctx.entities.getTyped(a.client, 'client');
      const l = client.__lsids || [];
      if (l.length < 2) throw new MatchError(op.name, 'fewer than two commands observed');
      const same = exactEqual(l[l.length - 1], l[l.length - 2]);
      if (same !== (op.name === 'assertSameLsidOnLastTwoCommands')) throw new MatchError(op.name, `lsids same=${same}`);
      return;
    }
    case 'assertSessionTransactionState': {
      // The unified format's states against the Node driver's.
      const session = ctx.entities.getTyped(a.session, 'session');
      const states = {
        none: ['NO_TRANSACTION'],
        starting: ['STARTING_TRANSACTION'],
        in_progress: ['TRANSACTION_IN_PROGRESS'],
        committed: ['TRANSACTION_COMMITTED', 'TRANSACTION_COMMITTED_EMPTY'],
        aborted: ['TRANSACTION_ABORTED'],
      };
      const actual = session.transaction?.state;
      if (!(states[a.state] || []).includes(actual)) throw new MatchError(op.name, `expected ${a.state}, session is ${actual}`);
      return;
    }
    case 'assertSessionDirty':
    case 'assertSessionNotDirty': {
      // A server session is dirty once a network error hit a command that used it
      // (the driver then discards it instead of pooling it).
      const session = ctx.entities.getTyped(a.session, 'session');
      const dirty = Boolean(session._serverSession && session._serverSession.isDirty);
      if (dirty !== (op.name === 'assertSessionDirty')) throw new MatchError(op.name, `session dirty=${dirty}`);
      return;
    }
    case 'createEntities':
      for (const e of a.entities) await createEntity(e, ctx.entities, ctx);
      return;
    default:
      throw new SkipTest(`testRunner operation ${op.name} not implemented`);
  }
}

async function runOperation(op, ctx) {
  if (op.object === 'testRunner') return runTestRunnerOp(op, ctx);
  const target = ctx.entities.get(op.object);
  const kind = target && target.__kind;
  const handler = handlerFor(kind, op.name);
  if (!handler) throw new SkipTest(`operation ${op.name} on ${kind} not implemented`);
  let result;
  let error = null;
  try {
    result = await handler(target, op.arguments || {}, ctx);
  } catch (e) {
    if (e instanceof SkipTest) throw e;
    error = e;
  }
  if (op.ignoreResultAndError) return;
  if (op.expectError) {
    checkExpectedError(op.expectError, error, ctx.entities);
    return;
  }
  if (error) throw new Error(`${op.name} failed unexpectedly: ${error.name}: ${error.message}${error.code !== undefined ? ` (code ${error.code})` : ''}`);
  if (op.expectResult !== undefined) {
    const iterable = ITERABLE_RESULTS.has(op.name);
    const actual = result === undefined ? undefined : result;
    if (iterable && Array.isArray(op.expectResult)) {
      if (!Array.isArray(actual)) throw new MatchError('expectResult', `expected an array, got ${show(actual)}`);
      if (actual.length !== op.expectResult.length) {
        throw new MatchError('expectResult', `expected ${op.expectResult.length} documents, got ${actual.length}: ${show(actual)}`);
      }
      op.expectResult.forEach((e, i) => match(e, actual[i], { root: true, entities: ctx.entities, path: `expectResult[${i}]` }));
    } else {
      match(op.expectResult, actual, { root: true, entities: ctx.entities, path: 'expectResult' });
    }
  }
  if (op.saveResultAsEntity) {
    ctx.entities.set(op.saveResultAsEntity, result);
  }
}

/**
 * The one client-side difference the runner forgives. The Node driver these files come
 * from (lib/sessions.js) adds `wtimeout: 10000` to the write concern of every
 * commitTransaction and abortTransaction that has one when no timeoutMS is set; the
 * specification asks for it only on a retried commit, and the driver's own runner
 * accepts it because it allows extra fields in nested documents, which the unified
 * format does not. Only that field of that command, with that value, and only where the
 * test expects a writeConcern without a wtimeout of its own, is left out.
 */
function withoutDriverWtimeout(expected, actual) {
  const name = actual && Object.keys(actual)[0];
  if (name !== 'commitTransaction' && name !== 'abortTransaction') return actual;
  const wc = actual.writeConcern;
  const want = expected.writeConcern;
  if (!wc || !want || typeof want !== 'object' || 'wtimeout' in want) return actual;
  if (Number(wc.wtimeout) !== 10000) return actual;
  const { wtimeout, ...rest } = wc;
  return { ...actual, writeConcern: rest };
}

function checkEvents(expectEvents, ctx) {
  for (const group of expectEvents) {
    const eventType = group.eventType || 'command';
    if (eventType !== 'command') throw new SkipTest(`expectEvents eventType ${eventType} not implemented`);
    const client = ctx.entities.getTyped(group.client, 'client');
    const actual = client.__events;
    const expected = group.events;
    const where = `expectEvents[${group.client}]`;
    if (group.ignoreExtraEvents ? actual.length < expected.length : actual.length !== expected.length) {
      throw new MatchError(
        where,
        `expected ${expected.length} events, got ${actual.length}: ${actual.map((a) => `${a.type}:${a.event.commandName}`).join(', ')}`,
      );
    }
    expected.forEach((exp, i) => {
      const [type, spec] = Object.entries(exp)[0];
      const got = actual[i];
      const p = `${where}[${i}]`;
      if (got.type !== type) throw new MatchError(p, `expected ${type}, got ${got.type} (${got.event.commandName})`);
      const ev = got.event;
      if (spec.commandName !== undefined && spec.commandName !== ev.commandName) {
        throw new MatchError(`${p}.commandName`, `expected ${spec.commandName}, got ${ev.commandName}`);
      }
      if (spec.databaseName !== undefined && spec.databaseName !== ev.databaseName) {
        throw new MatchError(`${p}.databaseName`, `expected ${spec.databaseName}, got ${ev.databaseName}`);
      }
      if (spec.command !== undefined) {
        match(spec.command, withoutDriverWtimeout(spec.command, ev.command), { root: true, entities: ctx.entities, path: `${p}.command` });
      }
      if (spec.reply !== undefined) match(spec.reply, ev.reply, { root: true, entities: ctx.entities, path: `${p}.reply` });
      if (spec.hasServiceId !== undefined && spec.hasServiceId !== (ev.serviceId != null)) {
        throw new MatchError(`${p}.hasServiceId`, `expected ${spec.hasServiceId}`);
      }
      if (spec.hasServerConnectionId !== undefined && spec.hasServerConnectionId !== (ev.serverConnectionId != null)) {
        throw new MatchError(`${p}.hasServerConnectionId`, `expected ${spec.hasServerConnectionId}`);
      }
    });
  }
}

async function setUpInitialData(initialData, internal) {
  for (const cd of initialData || []) {
    const db = internal.db(cd.databaseName);
    await db.dropCollection(cd.collectionName, { writeConcern: { w: 'majority' } }).catch((e) => {
      if (e.code !== 26) throw e;
    });
    if (cd.createOptions || !cd.documents || cd.documents.length === 0) {
      await db.createCollection(cd.collectionName, { ...(cd.createOptions || {}), writeConcern: { w: 'majority' } });
    }
    if (cd.documents && cd.documents.length) {
      await db.collection(cd.collectionName).insertMany(cd.documents, { writeConcern: { w: 'majority' } });
    }
  }
}

async function checkOutcome(outcome, internal) {
  for (const cd of outcome) {
    const docs = await internal
      .db(cd.databaseName)
      .collection(cd.collectionName, { readConcern: { level: 'local' } })
      .find({}, { sort: { _id: 1 } })
      .toArray();
    const where = `outcome ${cd.databaseName}.${cd.collectionName}`;
    if (docs.length !== cd.documents.length) {
      throw new MatchError(where, `expected ${cd.documents.length} documents, got ${docs.length}: ${show(docs)}`);
    }
    cd.documents.forEach((e, i) => {
      if (!exactEqual(e, docs[i])) throw new MatchError(`${where}[${i}]`, `expected ${show(e)}, got ${show(docs[i])}`);
    });
  }
}

async function runTest(file, test, runner) {
  if (test.skipReason) throw new SkipTest(`skipReason: ${test.skipReason}`);
  const unmet = unmetRequirements(test.runOnRequirements, runner.server);
  if (unmet) throw new SkipTest(unmet);
  const unsupported = unsupportedOperation(test.operations);
  if (unsupported) throw new SkipTest(unsupported);

  const ctx = new TestContext(runner);
  try {
    await setUpInitialData(file.initialData, runner.internal);
    for (const e of file.createEntities || []) await createEntity(e, ctx.entities, ctx);
    for (const op of test.operations) await runOperation(op, ctx);
    for (const c of ctx.clients) c.__recording = false;
    if (test.expectEvents) checkEvents(test.expectEvents, ctx);
    if (test.outcome) await checkOutcome(test.outcome, runner.internal);
  } finally {
    await ctx.cleanup();
  }
}

function fileDatabases(file) {
  const names = new Set();
  for (const e of file.createEntities || []) if (e.database) names.add(e.database.databaseName);
  for (const cd of file.initialData || []) names.add(cd.databaseName);
  return [...names];
}

async function runFile(rel, runner, opts) {
  const res = { file: rel, passed: 0, failed: 0, skipped: 0, details: [] };
  let file;
  try {
    file = EJSON.parse(fs.readFileSync(path.join(opts.dir, rel), 'utf8'), { relaxed: false });
  } catch (e) {
    res.failed = 1;
    res.details.push({ status: 'FAIL', name: '(file)', why: `cannot parse: ${e.message}` });
    return res;
  }
  const [maj, min] = String(file.schemaVersion).split('.').map(Number);
  let fileSkip = null;
  if (maj !== SUPPORTED_SCHEMA[0] || min > SUPPORTED_SCHEMA[1]) fileSkip = `schemaVersion ${file.schemaVersion} not supported`;
  if (!fileSkip) fileSkip = unmetRequirements(file.runOnRequirements, runner.server);
  if (!fileSkip) {
    // Hermetic files: a file without initialData must not see another file's leftovers.
    // (The spec leaves this open; dropping the file's own databases first is always safe.)
    for (const name of fileDatabases(file)) {
      try {
        await runner.internal.db(name).dropDatabase();
      } catch (e) {
        res.failed = file.tests.length;
        res.details.push({ status: 'FAIL', name: '(file setup)', why: `dropDatabase ${name}: ${e.message}` });
        return res;
      }
    }
  }
  for (const test of file.tests) {
    if (fileSkip) {
      res.skipped++;
      res.details.push({ status: 'SKIP', name: test.description, why: fileSkip });
      continue;
    }
    try {
      await withTimeout(runTest(file, test, runner), opts.testTimeoutMs, `test "${test.description}"`);
      res.passed++;
      res.details.push({ status: 'PASS', name: test.description });
    } catch (e) {
      if (e instanceof SkipTest) {
        res.skipped++;
        res.details.push({ status: 'SKIP', name: test.description, why: e.message });
      } else {
        res.failed++;
        res.details.push({ status: 'FAIL', name: test.description, why: e.message || String(e) });
      }
    }
  }
  return res;
}

async function serverFacts(internal) {
  const admin = internal.db('admin');
  const build = await admin.command({ buildInfo: 1 });
  const hello = await admin.command({ hello: 1 }).catch(() => admin.command({ isMaster: 1 }));
  let topology = 'single';
  if (hello.msg === 'isdbgrid') topology = 'sharded';
  else if (hello.setName) topology = 'replicaset';
  const parameters = {};
  try {
    Object.assign(parameters, await admin.command({ getParameter: '*' }));
  } catch {
    /* server parameters unknown: requirements on them count as unmet */
  }
  return { version: build.version, topology, parameters };
}

/** Every "db.collection" the files' entities and initial data name (the proxy tiers them). */
function namespacesOf(files, opts) {
  const out = new Set();
  for (const rel of files) {
    const doc = JSON.parse(fs.readFileSync(path.join(opts.dir, rel), 'utf8'));
    const dbs = new Map();
    for (const e of doc.createEntities || []) if (e.database) dbs.set(e.database.id, e.database.databaseName);
    for (const e of doc.createEntities || []) if (e.collection && dbs.has(e.collection.database)) out.add(`${dbs.get(e.collection.database)}.${e.collection.collectionName}`);
    for (const d of doc.initialData || []) out.add(`${d.databaseName}.${d.collectionName}`);
  }
  // The proxy refuses to tier system databases.
  return [...out].filter((ns) => !/^(admin|local|config)\./.test(ns)).sort();
}

/**
 * The tiered deployment for --proxy: both stores with test commands on, the proxy with
 * them too (it evaluates failCommand itself, as mongos does), every collection of the
 * files tiered with a long horizon (the tests' documents carry no age field: they stay in
 * the fast tier once written, and reads without an age proof merge both tiers).
 */
async function startProxied(files, opts) {
  const { startTiered } = require('../lib/tiered');
  const t = await startTiered({
    // changeStreams: true, so that the change-stream tests can watch them (it turns cold
    // writes off for these collections).
    collections: namespacesOf(files, opts).map((namespace) => ({ namespace, changeStreams: true })),
    horizon: '30d',
    storeArgs: ['--setParameter', 'enableTestCommands=1'],
    extra: { setParameter: { enableTestCommands: true } },
  });
  await t.waitHealthy();
  return t;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (!fs.existsSync(opts.dir)) {
    // A clone without ../shared beside it has no conformance data: skipped, and why.
    // CI has it and sets HALOCLINE_REQUIRE_CONFORMANCE=1: there its absence fails.
    const why = `the conformance files (MongoDB's unified specification tests) are not at ${opts.dir}; set CONFORMANCE_DIR or put ../shared beside the clone`;
    if (process.env.HALOCLINE_REQUIRE_CONFORMANCE === '1') throw new Error(`${why} (HALOCLINE_REQUIRE_CONFORMANCE=1)`);
    console.log(`conformance: SKIPPED: ${why}`);
    return 0;
  }
  const { files: baseline, tests: baselineTests, known } = loadBaseline(opts.baseline);
  let files = listFiles(opts);
  if (opts.onlyBaseline) files = files.filter((f) => baseline.includes(f) || baselineTests[f]);
  if (opts.filters.length) files = files.filter((f) => opts.filters.some((s) => f.includes(s)));
  const allFiles = listFiles({ ...opts, suites: null });
  const missingBaseline = [...baseline, ...Object.keys(baselineTests)].filter((b) => !allFiles.includes(b));

  let server = null;
  let tiered = null;
  let uri = opts.uri;
  if (!uri && opts.proxy) {
    tiered = await startProxied(files, opts);
    uri = tiered.uri();
    // The proxy process is the one to watch (the stores' deaths surface as its errors).
    server = { proc: tiered.proxy.proc, cleanup: () => tiered.cleanup() };
  } else if (!uri) {
    // Test commands on, as the specification's test setups run mongod: the
    // transactions, retryable-writes and sessions tests drive failCommand.
    const extraArgs = ['--setParameter', 'enableTestCommands=1'];
    server = await startStore(opts.replSet ? { replSet: opts.replSet, extraArgs } : { extraArgs });
    uri = server.uri();
  }
  const internal = new MongoClient(uri, { serverSelectionTimeoutMS: 10_000 });
  let exitCode = 0;
  const totals = { passed: 0, failed: 0, skipped: 0 };
  const results = [];
  try {
    await internal.connect();
    const facts = await serverFacts(internal);
    console.log(`conformance: server ${facts.version}, topology ${facts.topology}, ${files.length} files from ${opts.dir}`);
    const runner = { uri, internal, server: facts };
    for (const rel of files) {
      if (server && !server.proc.running) {
        // The server died: every remaining file would only time out. Fail now, loudly.
        console.log(`conformance: the server exited while running the previous file; stopping\n${server.proc.tail()}`);
        exitCode = 1;
        break;
      }
      const r = await runFile(rel, runner, opts);
      results.push(r);
      totals.passed += r.passed;
      totals.failed += r.failed;
      totals.skipped += r.skipped;
      const tag = baseline.includes(rel) ? ' [baseline]' : baselineTests[rel] ? ` [baseline: ${baselineTests[rel].length} tests]` : '';
      console.log(`${rel}: ${r.passed} passed, ${r.failed} failed, ${r.skipped} skipped${tag}`);
      for (const d of r.details) {
        if (d.status === 'FAIL') {
          const reason = knownReason(known, rel, d.name);
          console.log(`  FAIL ${d.name}${reason ? ' [known]' : ''}\n       ${d.why.split('\n').join('\n       ')}`);
          if (reason) console.log(`       known: ${reason}`);
        }
        else if (d.status === 'SKIP' && opts.verbose) console.log(`  SKIP ${d.name}: ${d.why}`);
        else if (d.status === 'PASS' && opts.verbose) console.log(`  pass ${d.name}`);
      }
      if (!opts.verbose) {
        const reasons = new Map();
        for (const d of r.details.filter((x) => x.status === 'SKIP')) reasons.set(d.why, (reasons.get(d.why) || 0) + 1);
        for (const [why, n] of reasons) console.log(`  SKIP x${n}: ${why}`);
      }
    }
  } finally {
    await internal.close().catch(() => {});
    if (server) await server.cleanup();
  }

  const regressions = results.filter((r) => baseline.includes(r.file) && (r.failed > 0 || r.passed === 0));
  const newlyPassing = results.filter((r) => !baseline.includes(r.file) && r.failed === 0 && r.passed > 0);
  console.log('');
  if (missingBaseline.length) {
    console.log(`baseline files not found: ${missingBaseline.join(', ')}`);
    exitCode = 1;
  }
  if (regressions.length) {
    console.log(`REGRESSION: baseline files with failures (or no passing test): ${regressions.map((r) => r.file).join(', ')}`);
    exitCode = 1;
  }
  const testRegressions = [];
  for (const r of results) {
    for (const name of baselineTests[r.file] || []) {
      const d = r.details.find((x) => x.name === name);
      if (!d || d.status !== 'PASS') testRegressions.push(`${r.file}: "${name}" (${d ? d.status : 'not found'})`);
    }
  }
  if (testRegressions.length) {
    console.log(`REGRESSION: baseline tests that did not pass:\n  ${testRegressions.join('\n  ')}`);
    exitCode = 1;
  }
  // The known failures (the baseline's `known`): every failure should have its reason
  // written down, and a known failure that passes now should leave the list.
  const unexplained = [];
  const stale = [];
  for (const r of results) {
    for (const d of r.details) {
      const reason = knownReason(known, r.file, d.name);
      if (d.status === 'FAIL' && !reason) unexplained.push(`${r.file}: "${d.name}"`);
      if (d.status === 'PASS' && reason && known[r.file][d.name]) stale.push(`${r.file}: "${d.name}"`);
    }
  }
  const failedCount = results.reduce((n, r) => n + r.failed, 0);
  if (failedCount) {
    console.log(`failures explained in ${path.basename(opts.baseline)} (known): ${failedCount - unexplained.length} of ${failedCount}`);
  }
  if (unexplained.length) console.log(`UNEXPLAINED failures (find the cause; fix it or add it to known):\n  ${unexplained.join('\n  ')}`);
  if (stale.length) console.log(`Known failures that now pass (remove them from known):\n  ${stale.join('\n  ')}`);
  if (newlyPassing.length) {
    console.log('Files not in the baseline that now fully pass (add them to conformance/baseline.json):');
    for (const r of newlyPassing) console.log(`  "${r.file}",`);
  }
  const suites = new Map();
  for (const r of results) {
    const name = r.file.split('/')[0];
    const t = suites.get(name) || { files: 0, clean: 0, passed: 0, failed: 0, skipped: 0 };
    t.files++;
    if (r.failed === 0 && r.passed > 0) t.clean++;
    t.passed += r.passed;
    t.failed += r.failed;
    t.skipped += r.skipped;
    suites.set(name, t);
  }
  for (const [name, t] of suites) {
    const all = t.passed + t.failed + t.skipped;
    const pct = (n, d) => (d ? ((100 * n) / d).toFixed(1) : '0.0');
    console.log(
      `suite ${name}: ${t.passed}/${all} passed (${pct(t.passed, all)}%; ${pct(t.passed, t.passed + t.failed)}% of those run), ` +
        `${t.failed} failed, ${t.skipped} skipped; ${t.clean}/${t.files} files fully passing`,
    );
  }
  console.log(`conformance: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
  return exitCode;
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (e) => {
      console.error(`conformance runner error: ${e.stack || e}`);
      process.exit(2);
    },
  );
}

module.exports = { unmetRequirements, cmpVersion, unsupportedOperation };
