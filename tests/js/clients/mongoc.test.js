'use strict';
// Runs tests/integration/c/mongoc_smoke against a fresh server: plain, and with each wire
// compressor libmongoc was built with (the program checks the server agreed to it).

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { REPO_ROOT, startStore, makeTempDir } = require('../lib/server');
const { runProgram } = require('../lib/run');

const SOURCE = path.join(REPO_ROOT, 'tests', 'integration', 'c', 'mongoc_smoke.c');
let smoke;
let server;

/** $MONGOC_SMOKE_BIN, else the CMake-built target, else compile it here with pkg-config. */
async function locateOrBuild() {
  if (process.env.MONGOC_SMOKE_BIN) return process.env.MONGOC_SMOKE_BIN;
  for (const preset of ['asan-ubsan', 'debug', 'release']) {
    const p = path.join(REPO_ROOT, 'build', preset, 'tests', 'integration', 'mongoc_smoke');
    if (fs.existsSync(p) && fs.statSync(p).mtimeMs >= fs.statSync(SOURCE).mtimeMs) return p;
  }
  const flags = await runProgram('pkg-config', ['--cflags', '--libs', 'libmongoc-1.0']);
  assert.equal(flags.code, 0, `pkg-config libmongoc-1.0 failed: ${flags.stderr}`);
  const out = path.join(makeTempDir('halocline-mongoc-'), 'mongoc_smoke');
  const cc = process.env.CC || 'cc';
  const r = await runProgram(cc, ['-std=gnu11', '-O1', '-g', '-o', out, SOURCE, ...flags.stdout.trim().split(/\s+/)]);
  assert.equal(r.code, 0, `compiling mongoc_smoke failed:\n${r.stderr}`);
  return out;
}

before(async () => {
  smoke = await locateOrBuild();
  server = await startStore();
});
after(async () => {
  if (server) await server.cleanup();
});

async function runSmoke(uriParams, extra = []) {
  const r = await runProgram(smoke, [server.uri({ serverSelectionTimeoutMS: '10000', ...uriParams }), ...extra], {
    timeoutMs: 180_000,
  });
  const out = `${r.stdout}\n${r.stderr}`;
  assert.ok(!r.timedOut, `mongoc_smoke timed out\n${out}`);
  assert.equal(r.code, 0, `mongoc_smoke failed (exit ${r.code}, signal ${r.signal})\n${out}`);
  assert.match(r.stdout, /mongoc_smoke: OK/);
}

test('libmongoc: CRUD, indexes, cursors, errors', async () => {
  await runSmoke({});
});

for (const compressor of ['zlib', 'snappy', 'zstd']) {
  test(`libmongoc with compressors=${compressor}`, async () => {
    await runSmoke({ compressors: compressor }, ['--expect-compressor', compressor]);
  });
}
