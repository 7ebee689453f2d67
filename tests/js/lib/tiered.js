'use strict';
// A tiered deployment for integration tests: two `halocline store --replSet` processes
// (fast and archive, each on port 0 with its own temp dbpath) and `halocline proxy
// --config FILE.yaml` in front of them, plus bounded polling helpers over
// `haloclineStatus` / `haloclineExplain`.
//
// Contract (same as lib/server.js):
//  - No fixed ports: every process starts on port 0 and reports its port in the
//    `"Waiting for connections"` JSON log line. A restart after kill -9 reuses the port it
//    had (the stores so the proxy's tier URIs stay valid; the proxy so clients holding its
//    URI reconnect), unless asked for a new one.
//  - No sleeps as synchronisation: everything that waits polls a condition with a deadline
//    and fails with a message naming the condition and the last value seen.
//  - Every field name read from haloclineStatus / haloclineExplain is read in
//    statusView() / explainView() below and nowhere else, so a renamed field is a one-line
//    change here.

const fs = require('node:fs');
const path = require('node:path');
const { MongoClient, Timestamp, BSON } = require('mongodb');
const {
  haloclineBinary,
  makeTempDir,
  removeTempDir,
  startStore,
  startProcess,
  waitingForConnections,
} = require('./server');

const CLIENT_DEFAULTS = { serverSelectionTimeoutMS: 10_000, connectTimeoutMS: 10_000, socketTimeoutMS: 60_000 };
// Users created on the tier stores by startTiered({auth}).
const AUTH_ADMIN = { user: 'haloAdmin', pwd: 'admin-pw' };
const AUTH_PROXY = { user: 'haloProxy', pwd: 'proxy-pw,with=odd:chars@/' };
// The role docs/OPERATIONS.md tells operators to create for the proxy's tier user.
const VIEW_USERS_ROLE = {
  role: 'haloclineViewUsers',
  privileges: [{ resource: { db: '', collection: '' }, actions: ['viewUser', 'viewRole'] }],
  roles: [],
};
const DEFAULT_WAIT_MS = 60_000;

// ---------------------------------------------------------------------------------------
// Durations ("500ms", "2s", "5m", "30d" or plain seconds), as the proxy's config reads them.

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Milliseconds of a duration given as a config string or a number of milliseconds. */
function durationMs(d) {
  if (typeof d === 'number') return d;
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(String(d));
  if (!m) throw new Error(`bad duration: ${d}`);
  return Number(m[1]) * UNIT_MS[m[2] || 's'];
}

/** The config spelling of a duration: strings pass through, numbers are milliseconds. */
function durationText(d) {
  if (typeof d === 'number') return `${Math.round(d)}ms`;
  durationMs(d); // validates
  return String(d);
}

// ---------------------------------------------------------------------------------------
// A minimal block-style YAML emitter (maps, lists, scalars): enough for the proxy config
// and parsed by yaml-cpp. Strings are double-quoted with JSON escapes, which YAML accepts.

function yamlScalar(v) {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error(`toYaml: non-finite number ${v}`);
    return String(v);
  }
  return JSON.stringify(String(v));
}

function isMap(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Date);
}

function yamlLines(value, indent) {
  const out = [];
  for (const [k, v] of Object.entries(value)) {
    if (v === undefined) continue;
    const key = /^[A-Za-z_][A-Za-z0-9_.-]*$/.test(k) ? k : JSON.stringify(k);
    if (isMap(v)) {
      if (Object.keys(v).length === 0) out.push(`${indent}${key}: {}`);
      else out.push(`${indent}${key}:`, ...yamlLines(v, `${indent}  `));
    } else if (Array.isArray(v)) {
      if (v.length === 0) {
        out.push(`${indent}${key}: []`);
        continue;
      }
      out.push(`${indent}${key}:`);
      for (const item of v) {
        if (isMap(item) && Object.keys(item).length) {
          const inner = yamlLines(item, `${indent}    `);
          inner[0] = `${indent}  - ${inner[0].slice(indent.length + 4)}`;
          out.push(...inner);
        } else if (isMap(item) || Array.isArray(item)) {
          throw new Error(`toYaml: unsupported list item ${JSON.stringify(item)}`);
        } else {
          out.push(`${indent}  - ${yamlScalar(item)}`);
        }
      }
    } else {
      out.push(`${indent}${key}: ${yamlScalar(v)}`);
    }
  }
  return out;
}

function toYaml(obj) {
  return `${yamlLines(obj, '').join('\n')}\n`;
}

/** Recursive merge of plain objects (arrays and scalars in `over` replace). */
function deepMerge(base, over) {
  if (!isMap(base) || !isMap(over)) return over === undefined ? base : over;
  const out = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = isMap(v) && isMap(base[k]) ? deepMerge(base[k], v) : v;
  return out;
}

// ---------------------------------------------------------------------------------------
// Proxy configuration.

const DEFAULT_WORKERS = {
  enabled: true,
  lease: '10s',
  feeder: { batchSize: 1000 },
  evictor: { interval: '200ms', maxDocsPerSecond: 10000 },
  warmer: { batchSize: 200, maxDocsPerSecond: 10000, interval: '500ms' },
};

/**
 * Normalises the tiered-collection list: "db.coll" or {namespace, ageField, horizon}.
 * Defaults: ageField "date", the deployment's horizon.
 */
function normaliseCollections(collections, horizon) {
  return collections.map((c) => {
    const spec = typeof c === 'string' ? { namespace: c } : { ...c };
    if (!spec.namespace || !spec.namespace.includes('.')) throw new Error(`bad tiered collection ${JSON.stringify(c)}`);
    return {
      namespace: spec.namespace,
      ageField: spec.ageField || 'date',
      horizon: durationText(spec.horizon ?? horizon),
      ...Object.fromEntries(Object.entries(spec).filter(([k]) => !['namespace', 'ageField', 'horizon'].includes(k))),
    };
  });
}

/**
 * The proxy's config object (see the YAML in the proxy's documentation):
 *  {fastUri, archiveUri, port, collections, horizon, guard, causalWaitTimeout,
 *   metadataDatabase, workers (true | false | partial workers block), logPath, extra}
 */
function buildProxyConfig({
  fastUri,
  archiveUri,
  port = 0,
  collections,
  horizon = '5s',
  guard = '1s',
  causalWaitTimeout = '10s',
  metadataDatabase = 'halocline',
  workers = true,
  logPath,
  extra = {},
}) {
  let workersBlock;
  if (workers === false) workersBlock = { enabled: false };
  else if (workers === true || workers === undefined) workersBlock = DEFAULT_WORKERS;
  else workersBlock = deepMerge(DEFAULT_WORKERS, workers);
  const config = {
    net: { bindIp: '127.0.0.1', port },
    tiers: { fast: { uri: fastUri }, archive: { uri: archiveUri } },
    tiering: {
      metadataDatabase,
      clockSkewGuard: durationText(guard),
      causalWaitTimeout: durationText(causalWaitTimeout),
      collections: normaliseCollections(collections, horizon),
    },
    workers: workersBlock,
  };
  if (logPath) config.systemLog = { destination: 'file', path: logPath };
  return deepMerge(config, extra);
}

// ---------------------------------------------------------------------------------------
// The proxy process.

class ProxyServer {
  constructor({ bin, configPath, configFor, env, readyTimeoutMs, name = 'halocline proxy' }) {
    this.bin = bin;
    this.configPath = configPath;
    this.configFor = configFor; // (port) -> config object
    this.env = env;
    this.readyTimeoutMs = readyTimeoutMs;
    this.name = name;
    this.host = '127.0.0.1';
    this.port = null;
    this.proc = null;
    this.starts = 0;
    this.previous = []; // earlier ManagedProcess instances (for sanitizer checks)
  }

  /** Writes the config (with `port`, 0 = any) and starts the proxy; waits for its port. */
  async start(port = 0) {
    this.config = this.configFor(port);
    fs.writeFileSync(this.configPath, toYaml(this.config));
    if (this.proc) this.previous.push(this.proc);
    const { proc, ready } = await startProcess({
      bin: this.bin,
      args: ['proxy', '--config', this.configPath],
      readyPattern: waitingForConnections,
      readyTimeoutMs: this.readyTimeoutMs,
      env: this.env,
      name: `${this.name}#${++this.starts}`,
    });
    this.proc = proc;
    this.port = ready;
    return this;
  }

  get running() {
    return Boolean(this.proc && this.proc.running);
  }

  uri(params = {}) {
    const q = new URLSearchParams({ serverSelectionTimeoutMS: '10000', ...params });
    return `mongodb://${this.host}:${this.port}/?${q}`;
  }

  async kill() {
    if (this.proc) await this.proc.kill();
  }

  /** Graceful stop: SIGTERM, bounded wait; throws on a non-zero exit or sanitizer output. */
  async stop() {
    if (!this.proc) return null;
    if (!this.proc.running) {
      // Killed on purpose (kill()) and not restarted, or exited on its own (a crash).
      this.checkExit(this.proc.exitInfo, { crashed: this.proc.crashed, killed: !this.proc.crashed });
      return this.proc.exitInfo;
    }
    const info = await this.proc.stop();
    this.checkExit(info);
    return info;
  }

  /** Start again; by default on the same port (clients keep their URI). */
  async restart({ samePort = true } = {}) {
    if (this.running) await this.stop();
    return this.start(samePort ? this.port : 0);
  }

  sanitizerReports() {
    return [...this.previous, this.proc].filter(Boolean).flatMap((p) => p.sanitizerReports);
  }

  checkExit(info, { crashed = false, killed = false } = {}) {
    const problems = [];
    if (crashed) problems.push(`exited on its own (code=${info.code}, signal=${info.signal})`);
    else if (!killed && (info.code !== 0 || info.signal)) problems.push(`exit code=${info.code} signal=${info.signal} after SIGTERM`);
    const san = this.sanitizerReports();
    if (san.length) problems.push(`sanitizer reports:\n${san.join('\n')}`);
    if (problems.length) throw new Error(`${this.name}: ${problems.join('; ')}\n${this.proc.tail()}`);
  }
}

// ---------------------------------------------------------------------------------------
// Polling.

/**
 * Polls `fn` until it returns a truthy value (returned), with a deadline. `fn` may throw:
 * the error is remembered and polling continues. On timeout throws an Error naming `what`
 * and the last value or error (and `detail()` when given). `abortIf()` returning an Error
 * stops the wait at once with that error (e.g. a background worker crashed).
 */
async function waitUntil(what, fn, { timeoutMs = DEFAULT_WAIT_MS, intervalMs = 100, detail, abortIf } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  let lastErr;
  for (;;) {
    const abort = abortIf && abortIf();
    if (abort) throw abort;
    try {
      last = await fn();
      lastErr = undefined;
      if (last) return last;
    } catch (e) {
      lastErr = e;
    }
    if (Date.now() >= deadline) {
      let extra = '';
      if (detail) {
        try {
          extra = `\n${await detail()}`;
        } catch (e) {
          extra = `\n(detail failed: ${e.message})`;
        }
      }
      const lastText = lastErr ? `last error: ${lastErr.stack || lastErr}` : `last value: ${show(last)}`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; ${lastText}${extra}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Extended JSON (relaxed) of a value for messages: timestamps as {t, i}, dates as ISO. */
function show(v) {
  if (v === undefined) return 'undefined';
  try {
    return BSON.EJSON.stringify(v, { relaxed: true });
  } catch {
    try {
      return JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? x.toString() : x));
    } catch {
      return String(v);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Cluster times.

/** A BSON Timestamp as a BigInt (t << 32 | i); null/undefined stay null. */
function tsValue(ts) {
  if (ts === null || ts === undefined) return null;
  if (ts instanceof Timestamp || ts._bsontype === 'Timestamp') return (BigInt(ts.t >>> 0) << 32n) | BigInt(ts.i >>> 0);
  throw new Error(`not a BSON Timestamp: ${show(ts)}`);
}

// ---------------------------------------------------------------------------------------
// haloclineStatus / haloclineExplain field access: the ONLY place that knows field names.

function need(obj, pathText, raw) {
  let v = obj;
  for (const k of pathText.split('.')) {
    if (v === null || v === undefined || !(k in Object(v))) {
      throw new Error(`haloclineStatus has no field ${pathText}: ${show(raw)}`);
    }
    v = v[k];
  }
  return v;
}

/** Number from a BSON numeric (int32/double/Long). */
function num(v) {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  if (v && typeof v.toNumber === 'function') return v.toNumber();
  if (v && v._bsontype === 'Double') return v.value;
  throw new Error(`not a number: ${show(v)}`);
}

/**
 * A normalised view of haloclineStatus:
 *  {raw, reachable: {fast, archive}, role, feeder: {lagOps, lagSeconds, appliedTime},
 *   routing: {fast, archive}, hitRatio, coll(ns) -> {warmLow, warmDone, warmed, backlog,
 *   evicted, routing: {fast, archive, merged, cold, promoted}, hitRatio}}
 */
function statusView(raw) {
  const view = {
    raw,
    reachable: {
      fast: need(raw, 'tiers.fast.reachable', raw) === true,
      archive: need(raw, 'tiers.archive.reachable', raw) === true,
    },
    role: need(raw, 'workers.role', raw),
    feeder: {
      lagOps: raw.feeder && raw.feeder.lagOps !== undefined && raw.feeder.lagOps !== null ? num(raw.feeder.lagOps) : null,
      lagSeconds:
        raw.feeder && raw.feeder.lagSeconds !== undefined && raw.feeder.lagSeconds !== null
          ? num(raw.feeder.lagSeconds)
          : null,
      appliedTime: raw.feeder ? raw.feeder.appliedTime ?? null : null,
      pausedUntil: raw.feeder ? raw.feeder.pausedUntil ?? null : null,
      mode: raw.feeder ? raw.feeder.mode ?? null : null,
      receivedTime: raw.feeder ? raw.feeder.receivedTime ?? null : null,
      pending: raw.feeder ? num(raw.feeder.pendingDocuments ?? 0) : 0,
      archiveWrites: raw.feeder ? num(raw.feeder.archiveWrites ?? 0) : 0,
    },
    routing: { fast: num(need(raw, 'routing.fast', raw)), archive: num(need(raw, 'routing.archive', raw)) },
    hitRatio: raw.hitRatio === null || raw.hitRatio === undefined ? null : num(raw.hitRatio),
  };
  view.coll = (ns) => {
    const c = need(raw, 'collections', raw)[ns];
    if (!c) throw new Error(`haloclineStatus has no collections["${ns}"]: ${show(raw)}`);
    const low = need(c, 'warm.low', raw);
    return {
      raw: c,
      warmLow: low === null ? null : low,
      warmDone: need(c, 'warm.done', raw) === true,
      warmed: num(need(c, 'warm.warmed', raw)),
      backlog: num(need(c, 'evictor.backlog', raw)),
      evicted: num(need(c, 'evictor.evicted', raw)),
      routing: {
        fast: num(need(c, 'routing.fast', raw)),
        archive: num(need(c, 'routing.archive', raw)),
        merged: num(need(c, 'routing.mergedReads', raw)),
        cold: num(need(c, 'routing.coldWrites', raw)),
        promoted: num(need(c, 'routing.promoted', raw)),
      },
      hitRatio: c.hitRatio === null || c.hitRatio === undefined ? null : num(c.hitRatio),
    };
  };
  return view;
}

const TIERS = ['fast', 'archive', 'fast-then-archive', 'refused'];

/** {tier, reason, raw} of a haloclineExplain reply; tier must be one of TIERS. */
function explainView(raw) {
  const tier = raw.tier;
  if (!TIERS.includes(tier)) throw new Error(`haloclineExplain: tier ${show(tier)} not one of ${TIERS}: ${show(raw)}`);
  if (typeof raw.reason !== 'string' || !raw.reason) throw new Error(`haloclineExplain: no reason: ${show(raw)}`);
  return { tier, reason: raw.reason, raw };
}

// ---------------------------------------------------------------------------------------
// The deployment.

/**
 * startTiered({collections, horizon, guard, causalWaitTimeout, workers, extra, bin, env,
 *              startProxy = true, metadataDatabase, auth})
 *  auth: true or {proxyRoles, mechanisms: {fast, archive}, authMechanism, proxyPassword}: both
 *    stores run with --auth; a root user (AUTH_ADMIN) is created through the localhost
 *    exception, then the proxy's user (AUTH_PROXY, roles proxyRoles, default
 *    readWriteAnyDatabase; mechanisms per tier), and the proxy's tier URIs carry that user
 *    (authSource=admin, authMechanism when given, the password `proxyPassword` when given:
 *    a wrong one makes the proxy refuse to start). tierClient() logs in as the root user.
 *  collections: ["db.coll" | {namespace, ageField, horizon}] (default ["shop.orders"])
 *  workers: true (defaults) | false (disabled) | partial workers block merged into defaults
 *  extra: merged into the generated config object last
 *  startProxy: false to load the tiers directly first, then call t.startProxy()
 *  storeArgs: extra command-line arguments for both stores
 *  tls: {certs (lib/certs.js makeCerts()), tiers = true, proxy = true, tierPem, tierUriParams,
 *        clientCerts = false}
 *     tiers: both stores run --tlsMode requireTLS (with tierPem, default certs.serverPem) and
 *            the proxy's tier URIs carry tls=true&tlsCAFile=certs.caFile, plus tierUriParams
 *            (e.g. {tlsCAFile: certs.otherCaFile} to make them fail; undefined drops one);
 *     clientCerts: the stores also require client certificates (--tlsCAFile) and the tier
 *            URIs carry tlsCertificateKeyFile=certs.clientPem;
 *     proxy: the proxy's net.tls is requireTLS with certs.serverPem.
 *     t.client() / t.tierClient() then connect with tls and tlsCAFile.
 * Returns a Tiered handle; always call t.cleanup() (it stops everything, removes the temp
 * dirs, and throws if any process crashed on its own or a sanitizer reported).
 */
async function startTiered(opts = {}) {
  const t = new Tiered(opts);
  try {
    await t.startTiers();
    if (opts.startProxy !== false) await t.startProxy();
  } catch (e) {
    await t.cleanup().catch(() => {});
    throw e;
  }
  return t;
}

class Tiered {
  constructor({
    collections = ['shop.orders'],
    horizon = '5s',
    guard = '1s',
    causalWaitTimeout = '10s',
    metadataDatabase = 'halocline',
    workers = true,
    extra = {},
    bin,
    env,
    readyTimeoutMs,
    tls,
    auth = null,
    storeArgs = [],
  } = {}) {
    this.bin = bin || haloclineBinary();
    this.tls = tls ? { tiers: true, proxy: true, tierUriParams: {}, ...tls } : null;
    if (this.tls && !this.tls.certs) throw new Error('startTiered: tls needs certs (lib/certs.js makeCerts())');
    if (!this.bin) throw new Error('halocline binary not found: set HALOCLINE_BIN or build build/asan-ubsan or build/debug');
    this.options = { collections, horizon, guard, causalWaitTimeout, metadataDatabase, workers, extra };
    this.horizonMs = durationMs(horizon);
    this.guardMs = durationMs(guard);
    this.metadataDatabase = metadataDatabase;
    this.namespaces = normaliseCollections(collections, horizon).map((c) => c.namespace);
    this.env = env;
    this.readyTimeoutMs = readyTimeoutMs;
    this.storeArgs = storeArgs;
    this.auth = auth ? { proxyRoles: ['readWriteAnyDatabase'], mechanisms: {}, ...(auth === true ? {} : auth) } : null;
    this.dir = makeTempDir('halocline-tiered-');
    this.clients = [];
    this.proxy = null;
    this.fast = null;
    this.archive = null;
    this.tierPorts = {};
  }

  async startTiers() {
    const common = { bin: this.bin, env: this.env, readyTimeoutMs: this.readyTimeoutMs };
    if (this.tls && this.tls.tiers) {
      const { certs, tierPem } = this.tls;
      common.extraArgs = ['--tlsMode', 'requireTLS', '--tlsCertificateKeyFile', tierPem || certs.serverPem];
      if (this.tls.clientCerts) common.extraArgs.push('--tlsCAFile', certs.caFile);
    }
    const fastPath = path.join(this.dir, 'fast');
    const archivePath = path.join(this.dir, 'archive');
    fs.mkdirSync(fastPath);
    fs.mkdirSync(archivePath);
    const extraArgs = [...(common.extraArgs || []), ...(this.auth ? ['--auth'] : []), ...this.storeArgs];
    [this.fast, this.archive] = await Promise.all([
      startStore({ ...common, dbpath: fastPath, replSet: 'fast', extraArgs }),
      startStore({ ...common, dbpath: archivePath, replSet: 'archive', extraArgs }),
    ]);
    if (this.auth) await Promise.all(['fast', 'archive'].map((w) => this.createUsers(w)));
  }

  /** With auth: the root user (localhost exception), then the proxy's user. */
  async createUsers(which) {
    const s = which === 'fast' ? this.fast : this.archive;
    const bootstrap = new MongoClient(s.uri(), CLIENT_DEFAULTS);
    try {
      await bootstrap.connect();
      await bootstrap.db('admin').command({ createUser: AUTH_ADMIN.user, pwd: AUTH_ADMIN.pwd, roles: ['root'] });
    } finally {
      await bootstrap.close();
    }
    const root = new MongoClient(s.uri(), { ...CLIENT_DEFAULTS, ...this.rootCredentials() });
    try {
      await root.connect();
      const mechanisms = this.auth.mechanisms[which];
      // What the proxy needs to authenticate its own clients against the archive's users
      // (docs/OPERATIONS.md, Tier credentials): view users on every database.
      await root.db('admin').command({ createRole: VIEW_USERS_ROLE.role, privileges: VIEW_USERS_ROLE.privileges, roles: VIEW_USERS_ROLE.roles });
      await root.db('admin').command({
        createUser: AUTH_PROXY.user,
        pwd: AUTH_PROXY.pwd,
        roles: [...this.auth.proxyRoles, { role: VIEW_USERS_ROLE.role, db: 'admin' }],
        ...(mechanisms ? { mechanisms } : {}),
      });
    } finally {
      await root.close();
    }
  }

  /** MongoClient options logging in as the tiers' root user (with auth), else {}. */
  rootCredentials() {
    if (!this.auth) return {};
    return { auth: { username: AUTH_ADMIN.user, password: AUTH_ADMIN.pwd }, authSource: 'admin' };
  }

  /**
   * An Error describing the first managed process (proxy, fast store, archive store) that
   * exited without being asked to, or null. Waits abort on it at once.
   */
  crashError() {
    const procs = [
      ['proxy', this.proxy && this.proxy.proc],
      ['fast store', this.fast && this.fast.proc],
      ['archive store', this.archive && this.archive.proc],
    ];
    for (const [name, p] of procs) {
      if (!p || !p.crashed) continue;
      const { code, signal } = p.exitInfo;
      const hint =
        code === 0 && !signal ? ' (a clean exit nobody here asked for: a SIGTERM/SIGINT or shutdown command from elsewhere?)' : '';
      const san = p.sanitizerReports.length ? `\nsanitizer: ${p.sanitizerReports.join('\n')}` : '';
      return new Error(`the ${name} exited on its own (code=${code}, signal=${signal})${hint}${san}\n${p.tail()}`);
    }
    return null;
  }

  /** The tier URIs the proxy is configured with (replica-set URIs, as in production). */
  tierUri(which) {
    const s = which === 'fast' ? this.fast : this.archive;
    const params = { replicaSet: which };
    if (this.tls && this.tls.tiers) {
      Object.assign(params, { tls: 'true', tlsCAFile: this.tls.certs.caFile });
      if (this.tls.clientCerts) params.tlsCertificateKeyFile = this.tls.certs.clientPem;
      Object.assign(params, this.tls.tierUriParams);
    }
    let credentials = '';
    if (this.auth) {
      const pwd = this.auth.proxyPassword ?? AUTH_PROXY.pwd;
      params.authSource = 'admin';
      if (this.auth.authMechanism) params.authMechanism = this.auth.authMechanism;
      credentials = `${encodeURIComponent(AUTH_PROXY.user)}:${encodeURIComponent(pwd)}@`;
    }
    const query = Object.entries(params)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${k}=${encodeURIComponent(v)}`)
      .join('&');
    return `mongodb://${credentials}127.0.0.1:${this.tierPorts[which] ?? s.port}/?${query}`;
  }

  /** Makes the proxy (started after this call) reach the `which` tier at `port` (a relay). */
  routeTier(which, port) {
    this.tierPorts[which] = port;
  }

  configFor(port) {
    let extra = this.options.extra;
    if (this.tls && this.tls.proxy) {
      extra = deepMerge({ net: { tls: { mode: 'requireTLS', certificateKeyFile: this.tls.certs.serverPem } } }, extra);
    }
    return buildProxyConfig({
      ...this.options,
      extra,
      fastUri: this.tierUri('fast'),
      archiveUri: this.tierUri('archive'),
      port,
    });
  }

  /** Driver options for TLS to the proxy ('proxy') or to a tier ('tiers'), when in use. */
  clientTls(which) {
    if (!this.tls || !this.tls[which]) return {};
    const options = { tls: true, tlsCAFile: this.tls.certs.caFile };
    if (which === 'tiers' && this.tls.clientCerts) options.tlsCertificateKeyFile = this.tls.certs.clientPem;
    return options;
  }

  async startProxy() {
    if (!this.proxy) {
      this.proxy = new ProxyServer({
        bin: this.bin,
        configPath: path.join(this.dir, 'proxy.yaml'),
        configFor: (port) => this.configFor(port),
        env: this.env,
        readyTimeoutMs: this.readyTimeoutMs,
      });
    }
    await this.proxy.start(0);
    return this.proxy;
  }

  /** The proxy's connection string (no replicaSet: it answers hello like mongos). */
  uri(params = {}) {
    return this.proxy.uri(params);
  }

  fastUri(params = {}) {
    return this.fast.uri(params);
  }

  archiveUri(params = {}) {
    return this.archive.uri(params);
  }

  async killProxy() {
    await this.proxy.kill();
  }

  /** Restart the proxy (graceful stop first if running); same port unless samePort: false. */
  async restartProxy({ samePort = true } = {}) {
    await this.proxy.restart({ samePort });
    return this.proxy;
  }

  async killFast() {
    await this.fast.kill();
  }

  async killArchive() {
    await this.archive.kill();
  }

  /** Stores always come back on their old port: the proxy's config names it. */
  async restartFast() {
    await this.fast.restart({ samePort: true });
  }

  async restartArchive() {
    await this.archive.restart({ samePort: true });
  }

  /**
   * A connected MongoClient through the proxy, closed by cleanup(). With auth the proxy
   * authenticates its clients against the archive's users: this one logs in as the tiers'
   * root user unless `options.auth` says otherwise (auth: null for none).
   */
  async client(options = {}, params = {}) {
    const creds = this.auth && !('auth' in options) ? this.rootCredentials() : {};
    const opts = { ...CLIENT_DEFAULTS, ...this.clientTls('proxy'), ...creds, ...options };
    if (opts.auth === null) delete opts.auth;
    return this.track(new MongoClient(this.uri(params), opts));
  }

  /** A connected MongoClient straight to one tier (directConnection), closed by cleanup(). */
  async tierClient(which, options = {}) {
    const s = which === 'fast' ? this.fast : this.archive;
    return this.track(new MongoClient(s.uri(), { ...CLIENT_DEFAULTS, ...this.clientTls('tiers'), ...this.rootCredentials(), ...options }));
  }

  async track(client) {
    this.clients.push(client);
    await client.connect();
    return client;
  }

  /** Lazily created admin clients used by the helpers below. */
  async adminClient() {
    if (!this._admin) this._admin = await this.client({ serverSelectionTimeoutMS: 5_000 });
    return this._admin;
  }

  async directClient(which) {
    const key = `_direct_${which}`;
    if (!this[key]) this[key] = await this.tierClient(which, { serverSelectionTimeoutMS: 5_000 });
    return this[key];
  }

  /** haloclineStatus through the proxy, as a statusView. */
  async status() {
    const c = await this.adminClient();
    return statusView(await c.db('admin').command({ haloclineStatus: 1 }));
  }

  /** haloclineExplain of `cmd` in database `db`, as an explainView. */
  async explain(cmd, db = 'shop') {
    const c = await this.adminClient();
    return explainView(await c.db('admin').command({ haloclineExplain: cmd, db }));
  }

  /**
   * An acknowledged write through the proxy on tiered namespace `ns` that leaves the
   * collection's contents unchanged (insert then delete of a marker document); returns the
   * delete's operationTime. Every write acknowledged before the call has a commit time
   * at or below it in the fast tier.
   */
  async writeBarrier(ns = this.namespaces[0], { ageField = 'date' } = {}) {
    const c = await this.adminClient();
    const [dbName, ...rest] = ns.split('.');
    const coll = c.db(dbName).collection(rest.join('.'));
    this._barriers = (this._barriers || 0) + 1;
    const id = `__barrier_${process.pid}_${this._barriers}`;
    const session = c.startSession();
    try {
      await coll.insertOne({ _id: id, [ageField]: new Date(0) }, { session });
      const r = await coll.deleteOne({ _id: id }, { session });
      if (r.deletedCount !== 1) throw new Error(`writeBarrier: deleteOne of ${id} deleted ${r.deletedCount}`);
      return session.operationTime;
    } finally {
      await session.endSession();
    }
  }

  /**
   * Waits until the feeder has applied every write up to `after` (a Timestamp; default: a
   * fresh writeBarrier on the first tiered namespace). Returns the final statusView.
   */
  async waitFeederCaughtUp({ after, timeoutMs = DEFAULT_WAIT_MS } = {}) {
    if (!after) after = await this.writeBarrier();
    // A lazy feeder writes what it gathered when asked (docs/OPERATIONS.md).
    if ((await this.status()).feeder.mode === 'lazy') {
      const c = await this.adminClient();
      await c.db('admin').command({ haloclineFlushFeeder: 1, maxTimeMS: timeoutMs });
    }
    const want = tsValue(after);
    let last;
    return waitUntil(
      `the feeder to apply every write up to ${show(after)}`,
      async () => {
        last = await this.status();
        const applied = last.feeder.appliedTime;
        return applied !== null && tsValue(applied) >= want ? last : false;
      },
      { timeoutMs, abortIf: () => this.crashError(), detail: () => `last haloclineStatus: ${show(last && last.raw)}` },
    );
  }

  /** Waits until the warmer reports a finished pass for `ns`. Returns the statusView. */
  async waitWarmDone(ns = this.namespaces[0], { timeoutMs = DEFAULT_WAIT_MS } = {}) {
    let last;
    return waitUntil(
      `the warmer to finish a pass over ${ns}`,
      async () => {
        last = await this.status();
        return last.coll(ns).warmDone ? last : false;
      },
      { timeoutMs, abortIf: () => this.crashError(), detail: () => `last haloclineStatus: ${show(last && last.raw)}` },
    );
  }

  /** Waits until both tiers are reachable from the proxy and the workers have a role. */
  async waitHealthy({ roles = ['leader'], timeoutMs = DEFAULT_WAIT_MS } = {}) {
    let last;
    return waitUntil(
      `both tiers reachable and workers role in ${roles}`,
      async () => {
        last = await this.status();
        return last.reachable.fast && last.reachable.archive && roles.includes(last.role) ? last : false;
      },
      { timeoutMs, abortIf: () => this.crashError(), detail: () => `last haloclineStatus: ${show(last && last.raw)}` },
    );
  }

  /** Documents of `ns` held by one tier, sorted by _id (BSON order of the tier). */
  async tierDocs(which, ns, filter = {}) {
    const c = await this.directClient(which);
    const [dbName, ...rest] = ns.split('.');
    return c.db(dbName).collection(rest.join('.')).find(filter).sort({ _id: 1 }).toArray();
  }

  /** Tombstones for `ns` in the fast tier's metadata. */
  /** The tombstones of `ns` in the fast tier (not cold writes' guards or marks). */
  async tombstones(ns) {
    const c = await this.directClient('fast');
    return c
      .db(this.metadataDatabase)
      .collection('tombstones')
      .find({ '_id.ns': ns, cold: { $exists: false }, mark: { $exists: false } })
      .toArray();
  }

  /** Cold writes' guards ('cold') or marks ('mark') on `ns` (CONSISTENCY.md, Cold writes). */
  async coldKeys(ns, kind) {
    const c = await this.directClient('fast');
    return c
      .db(this.metadataDatabase)
      .collection('tombstones')
      .find({ '_id.ns': ns, [kind]: { $exists: true } })
      .toArray();
  }

  /**
   * Waits until no cold write's guard on `ns` is left (CONSISTENCY.md, Cold writes: a
   * guard becomes a mark just after its write's reply).
   */
  async waitGuardsGone(ns = this.namespaces[0], { timeoutMs = DEFAULT_WAIT_MS } = {}) {
    let left;
    return waitUntil(
      `the cold writes' guards on ${ns} to be removed`,
      async () => {
        left = await this.coldKeys(ns, 'cold');
        return left.length === 0;
      },
      { timeoutMs, abortIf: () => this.crashError(), detail: () => show(left) },
    );
  }

  /** Closes clients, stops the proxy and the stores, removes the temp dir; throws on crashes. */
  async cleanup() {
    const errors = [];
    for (const c of this.clients) {
      try {
        await c.close(true);
      } catch {
        /* closing a client to a dead server may fail; nothing to clean */
      }
    }
    this.clients = [];
    if (this.proxy) {
      try {
        await this.proxy.stop();
      } catch (e) {
        errors.push(e);
      }
    }
    for (const s of [this.fast, this.archive]) {
      if (!s) continue;
      try {
        await s.cleanup();
      } catch (e) {
        errors.push(e);
      }
    }
    try {
      removeTempDir(this.dir);
    } catch (e) {
      errors.push(e);
    }
    if (errors.length) throw errors.length === 1 ? errors[0] : new AggregateError(errors, errors.map((e) => e.message).join('\n'));
  }
}

// ---------------------------------------------------------------------------------------
// Seeded randomness (for reproducible workloads: print the seed in every failure).

/** mulberry32: a small, fast 32-bit PRNG. Returns rng() in [0, 1) with helpers. */
function makeRng(seed) {
  let a = seed >>> 0;
  const rng = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  rng.int = (lo, hi) => lo + Math.floor(rng() * (hi - lo + 1)); // inclusive
  rng.pick = (arr) => arr[Math.floor(rng() * arr.length)];
  rng.chance = (p) => rng() < p;
  rng.weighted = (table) => {
    // table: [[weight, value], ...]
    const total = table.reduce((s, [w]) => s + w, 0);
    let x = rng() * total;
    for (const [w, v] of table) {
      if ((x -= w) < 0) return v;
    }
    return table[table.length - 1][1];
  };
  return rng;
}

/** The seed for this run: $HALO_SEED when set (to replay a failure), else random. */
function chooseSeed() {
  if (process.env.HALO_SEED) return Number(process.env.HALO_SEED) >>> 0;
  return Math.floor(Math.random() * 2 ** 32) >>> 0;
}

/** True for errors that leave a write's outcome unknown (connection/selection failures). */
function isNetworkError(e) {
  if (!e) return false;
  const names = ['MongoNetworkError', 'MongoNetworkTimeoutError', 'MongoServerSelectionError', 'MongoTopologyClosedError', 'MongoPoolClearedError'];
  if (names.includes(e.name)) return true;
  if (typeof e.hasErrorLabel === 'function' && e.hasErrorLabel('NetworkError')) return true;
  return false;
}

// ---------------------------------------------------------------------------------------
// Helpers the tests comparing the proxy with a plain store share.

/**
 * Closes `clients` and cleans up every deployment (a Tiered or a store), all of them even
 * when one fails; then throws the first error.
 */
async function cleanupAll(clients, deployments) {
  for (const c of clients) if (c) await c.close().catch(() => {});
  const errors = [];
  for (const x of deployments) {
    try {
      if (x) await x.cleanup();
    } catch (e) {
      errors.push(e);
    }
  }
  if (errors.length) throw errors[0];
}

/** What a change event through the proxy and one from a plain store must agree on (lsid, clusterTime and tokens differ by design). */
function eventEssence(ev) {
  const out = { op: ev.operationType, ns: ev.ns ? `${ev.ns.db}.${ev.ns.coll}` : undefined, id: ev.documentKey ? ev.documentKey._id : undefined };
  if (ev.fullDocument !== undefined) out.doc = ev.fullDocument;
  if (ev.updateDescription) {
    out.set = ev.updateDescription.updatedFields;
    out.unset = [...ev.updateDescription.removedFields].sort();
  }
  return out;
}

/** Reads events from `stream` into `into` (as eventEssence) until it holds `n` (each `next` waits for one). */
async function collectEvents(stream, into, n) {
  while (into.length < n) into.push(eventEssence(await stream.next()));
}

module.exports = {
  cleanupAll,
  eventEssence,
  collectEvents,
  startTiered,
  Tiered,
  ProxyServer,
  buildProxyConfig,
  toYaml,
  deepMerge,
  durationMs,
  durationText,
  waitUntil,
  statusView,
  explainView,
  tsValue,
  makeRng,
  chooseSeed,
  isNetworkError,
  show,
  CLIENT_DEFAULTS,
  AUTH_ADMIN,
  AUTH_PROXY,
};
