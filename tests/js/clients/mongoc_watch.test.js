'use strict';
// libmongoc's mongoc_collection_watch against `halocline store --replSet rs0`
// (tests/integration/c/mongoc_watch.c): events in order, resume tokens, resumeAfter.

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { REPO_ROOT, startStore, makeTempDir } = require('../lib/server');
const { runProgram } = require('../lib/run');

let server;
after(async () => {
  if (server) await server.cleanup();
});

test('libmongoc change streams: watch, event order, resumeAfter', async () => {
  let bin = process.env.MONGOC_WATCH_BIN;
  if (!bin) {
    const flags = await runProgram('pkg-config', ['--cflags', '--libs', 'libmongoc-1.0']);
    assert.equal(flags.code, 0, flags.stderr);
    bin = path.join(makeTempDir('halocline-mongoc-'), 'mongoc_watch');
    const src = path.join(REPO_ROOT, 'tests', 'integration', 'c', 'mongoc_watch.c');
    const r = await runProgram(process.env.CC || 'cc', ['-std=gnu11', '-O1', '-g', '-o', bin, src, ...flags.stdout.trim().split(/\s+/)]);
    assert.equal(r.code, 0, `compiling mongoc_watch failed:\n${r.stderr}`);
  }
  server = await startStore({ replSet: 'rs0' });
  const r = await runProgram(bin, [server.uri({ replicaSet: 'rs0', directConnection: 'false', serverSelectionTimeoutMS: '10000' })], { timeoutMs: 120_000 });
  assert.equal(r.code, 0, `mongoc_watch failed (exit ${r.code})\n${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /mongoc_watch: OK/);
});
