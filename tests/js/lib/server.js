'use strict';
// Start, stop and crash server processes for integration tests.
//
// Contract:
//  - No fixed ports: the server is started with `--port 0` and the port is read from its
//    mongod-4.4-style JSON log line `"msg":"Waiting for connections"` (attr.port).
//  - No sleeps: readiness is the log line, shutdown is the 'exit' event; both are bounded by
//    a timeout and fail loudly with the tail of the process output.
//  - Every started process and temp dir is tracked; an exit hook kills leftovers (SIGKILL)
//    and removes temp dirs even when a test throws.
//
// startProcess() is generic (any binary, any args, any readiness pattern) so the proxy tests
// can reuse it; startStore() is the `halocline store` convenience on top.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');

const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');
const DEFAULT_READY_TIMEOUT_MS = 30_000;
const DEFAULT_STOP_TIMEOUT_MS = 30_000;
const TAIL_LINES = 200;

const live = new Set(); // running ManagedProcess instances
const tempDirs = new Set(); // temp dirs to remove at exit

process.on('exit', () => {
  for (const p of live) {
    try {
      p.child.kill('SIGKILL');
    } catch {
      /* already gone */
    }
  }
  for (const d of tempDirs) {
    try {
      fs.rmSync(d, { recursive: true, force: true });
    } catch {
      /* best effort */
    }
  }
});
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.once(sig, () => process.exit(128 + (sig === 'SIGINT' ? 2 : 15)));
}

/** Path of the halocline binary: $HALOCLINE_BIN, else the first built one. */
function haloclineBinary() {
  if (process.env.HALOCLINE_BIN) return process.env.HALOCLINE_BIN;
  const candidates = [
    path.join(REPO_ROOT, 'build/asan-ubsan/src/cli/halocline'),
    path.join(REPO_ROOT, 'build/debug/src/cli/halocline'),
    path.join(REPO_ROOT, 'build/release/src/cli/halocline'),
  ];
  for (const c of candidates) {
    if (fs.existsSync(c)) return c;
  }
  return null;
}

/** A fresh directory under os.tmpdir(), removed at process exit unless `keep`. */
function makeTempDir(prefix = 'halocline-test-', { keep = false } = {}) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  if (!keep) tempDirs.add(d);
  return d;
}

function removeTempDir(d) {
  tempDirs.delete(d);
  fs.rmSync(d, { recursive: true, force: true });
}

/** Parses a mongod-style JSON log line; returns null for anything else. */
function parseLogLine(line) {
  if (!line.startsWith('{')) return null;
  try {
    return JSON.parse(line);
  } catch {
    return null;
  }
}

/** Readiness matcher for mongod-style logs: resolves to the listening port. */
function waitingForConnections(line) {
  const rec = parseLogLine(line);
  if (rec && rec.msg === 'Waiting for connections' && rec.attr && Number.isInteger(rec.attr.port)) {
    return rec.attr.port;
  }
  return undefined;
}

const SANITIZER_PATTERNS = [
  /ERROR: AddressSanitizer/,
  /ERROR: LeakSanitizer/,
  /runtime error:/, // UBSan
  /WARNING: ThreadSanitizer/,
];

class ManagedProcess {
  constructor(child, name) {
    this.child = child;
    this.name = name;
    this.pid = child.pid;
    this.stdoutTail = [];
    this.stderrTail = [];
    this.sanitizerReports = [];
    this.exitInfo = null;
    this.exitRequested = false; // set by stop()/kill(): any other exit is a crash
    this.lineListeners = new Set();
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exitInfo = { code, signal };
        live.delete(this);
        resolve(this.exitInfo);
      });
    });
    const attach = (stream, tail, which) => {
      const rl = readline.createInterface({ input: stream, crlfDelay: Infinity });
      rl.on('line', (line) => {
        tail.push(line);
        if (tail.length > TAIL_LINES) tail.shift();
        if (SANITIZER_PATTERNS.some((re) => re.test(line))) this.sanitizerReports.push(line);
        for (const l of this.lineListeners) l(line, which);
      });
    };
    attach(child.stdout, this.stdoutTail, 'stdout');
    attach(child.stderr, this.stderrTail, 'stderr');
  }

  get running() {
    return this.exitInfo === null;
  }

  /** The last output lines, for error messages. */
  tail(n = 40) {
    const out = this.stdoutTail.slice(-n).join('\n');
    const err = this.stderrTail.slice(-n).join('\n');
    return `--- ${this.name} stdout (tail) ---\n${out}\n--- ${this.name} stderr (tail) ---\n${err}`;
  }

  /**
   * Resolves with the first non-undefined value of `matcher(line)` on stdout or stderr
   * (lines already seen are not replayed). Rejects on exit or after timeoutMs.
   */
  waitForLine(matcher, timeoutMs = DEFAULT_READY_TIMEOUT_MS) {
    return new Promise((resolve, reject) => {
      let timer;
      const done = (fn, v) => {
        clearTimeout(timer);
        this.lineListeners.delete(listener);
        fn(v);
      };
      const listener = (line) => {
        let v;
        try {
          v = matcher(line);
        } catch (e) {
          return done(reject, e);
        }
        if (v !== undefined && v !== false && v !== null) done(resolve, v);
      };
      this.lineListeners.add(listener);
      timer = setTimeout(
        () => done(reject, new Error(`${this.name}: no matching output within ${timeoutMs} ms\n${this.tail()}`)),
        timeoutMs,
      );
      this.exited.then((info) => {
        // Let pending lines drain first: readline emits them before 'close'.
        setImmediate(() =>
          done(
            reject,
            new Error(`${this.name} exited (code=${info.code}, signal=${info.signal}) before ready\n${this.tail()}`),
          ),
        );
      });
    });
  }

  /**
   * SIGTERM, then wait for exit. If it does not exit within timeoutMs it is SIGKILLed and
   * this rejects. Resolves with {code, signal}.
   */
  async stop({ timeoutMs = DEFAULT_STOP_TIMEOUT_MS, signal = 'SIGTERM' } = {}) {
    if (!this.running) return this.exitInfo;
    this.exitRequested = true;
    this.child.kill(signal);
    let timer;
    const timedOut = new Promise((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    const r = await Promise.race([this.exited, timedOut]);
    clearTimeout(timer);
    if (r === 'timeout') {
      this.child.kill('SIGKILL');
      await this.exited;
      throw new Error(`${this.name} did not exit within ${timeoutMs} ms of ${signal}; killed\n${this.tail()}`);
    }
    return r;
  }

  /** SIGKILL (crash simulation) and wait for the exit. */
  async kill() {
    if (!this.running) return this.exitInfo;
    this.exitRequested = true;
    this.child.kill('SIGKILL');
    return this.exited;
  }

  /** True when the process ended without stop()/kill() having been called. */
  get crashed() {
    return !this.running && !this.exitRequested;
  }
}

/**
 * Spawns `bin args...` and waits until readyPattern matches a line of its output.
 *  readyPattern: RegExp (resolves to the match array) or function(line) -> value|undefined.
 * Returns {proc: ManagedProcess, ready: <matched value>}.
 */
async function startProcess({
  bin,
  args = [],
  readyPattern,
  readyTimeoutMs = DEFAULT_READY_TIMEOUT_MS,
  env = {},
  cwd,
  name,
} = {}) {
  if (!bin) throw new Error('startProcess: bin is required');
  if (!fs.existsSync(bin)) throw new Error(`startProcess: binary not found: ${bin}`);
  const child = spawn(bin, args, {
    cwd,
    env: { ASAN_OPTIONS: 'detect_leaks=1:abort_on_error=0', UBSAN_OPTIONS: 'print_stacktrace=1', ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const proc = new ManagedProcess(child, name || path.basename(bin));
  live.add(proc);
  await new Promise((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  });
  if (!readyPattern) return { proc, ready: true };
  const matcher =
    readyPattern instanceof RegExp ? (line) => line.match(readyPattern) || undefined : readyPattern;
  try {
    const ready = await proc.waitForLine(matcher, readyTimeoutMs);
    return { proc, ready };
  } catch (e) {
    await proc.kill();
    throw e;
  }
}

/**
 * Starts `halocline store --port 0 --dbpath <dir> [--replSet name] [...extraArgs]`.
 * Returns a StoreServer: {port, host, uri(options), dbpath, proc, stop(), kill(), restart()}.
 */
async function startStore({ bin, dbpath, replSet, extraArgs = [], readyTimeoutMs, env, keepDbpath = false } = {}) {
  bin = bin || haloclineBinary();
  if (!bin) {
    throw new Error(
      'halocline binary not found: set HALOCLINE_BIN or build build/asan-ubsan or build/debug',
    );
  }
  const ownDbpath = !dbpath;
  dbpath = dbpath || makeTempDir('halocline-store-', { keep: keepDbpath });
  const server = new StoreServer({ bin, dbpath, replSet, extraArgs, readyTimeoutMs, env, ownDbpath });
  await server.start();
  return server;
}

class StoreServer {
  constructor(opts) {
    Object.assign(this, opts);
    this.host = '127.0.0.1';
    this.port = null;
    this.proc = null;
  }

  args() {
    const a = ['store', '--port', String(this.fixedPort || 0), '--dbpath', this.dbpath];
    if (this.replSet) a.push('--replSet', this.replSet);
    return a.concat(this.extraArgs);
  }

  async start() {
    const { proc, ready } = await startProcess({
      bin: this.bin,
      args: this.args(),
      readyPattern: waitingForConnections,
      readyTimeoutMs: this.readyTimeoutMs,
      env: this.env,
      name: 'halocline store',
    });
    this.proc = proc;
    this.port = ready;
    return this;
  }

  /** Connection string; `params` become URI options (directConnection=true by default). */
  uri(params = {}) {
    const q = new URLSearchParams({ directConnection: 'true', ...params });
    return `mongodb://${this.host}:${this.port}/?${q}`;
  }

  /** Graceful stop; throws if it hangs, exits non-zero, or a sanitizer reported. */
  async stop({ allowNonZero = false } = {}) {
    if (!this.proc) return null;
    const info = await this.proc.stop();
    this.checkExit(info, allowNonZero);
    return info;
  }

  checkExit(info, allowNonZero) {
    const problems = [];
    if (!allowNonZero && (info.code !== 0 || info.signal)) {
      problems.push(`exit code=${info.code} signal=${info.signal} after SIGTERM`);
    }
    if (this.proc.sanitizerReports.length) {
      problems.push(`sanitizer reports:\n${this.proc.sanitizerReports.join('\n')}`);
    }
    if (problems.length) throw new Error(`halocline store: ${problems.join('; ')}\n${this.proc.tail()}`);
  }

  /** Crash (SIGKILL) and wait; the dbpath is kept for a restart. */
  async kill() {
    return this.proc.kill();
  }

  /**
   * Start again on the same dbpath: a new port, or with samePort the port the OS gave
   * us first (so clients holding the old address, e.g. a resuming change stream, reconnect).
   */
  async restart({ samePort = false } = {}) {
    if (this.proc && this.proc.running) await this.stop();
    this.fixedPort = samePort ? this.port : 0;
    return this.start();
  }

  /**
   * Stop (if running) and remove the dbpath if we created it. Always removes the dbpath;
   * then throws if the server crashed on its own, exited non-zero on SIGTERM, or a
   * sanitizer reported.
   */
  async cleanup() {
    let err = null;
    try {
      if (this.proc && this.proc.crashed) {
        const { code, signal } = this.proc.exitInfo;
        throw new Error(`halocline store exited unexpectedly (code=${code}, signal=${signal})\n${this.proc.tail()}`);
      }
      if (this.proc && this.proc.running) await this.stop();
      else if (this.proc) this.checkExit(this.proc.exitInfo, true);
    } catch (e) {
      err = e;
    }
    if (this.ownDbpath) removeTempDir(this.dbpath);
    if (err) throw err;
  }
}

module.exports = {
  REPO_ROOT,
  haloclineBinary,
  makeTempDir,
  removeTempDir,
  parseLogLine,
  waitingForConnections,
  startProcess,
  startStore,
  StoreServer,
  ManagedProcess,
};
