'use strict';
// `halocline bench load|run` against a store: the YCSB-style client loads,
// runs the concentrated preset to operationcount, and reports honest counts.

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { startStore, makeTempDir, haloclineBinary } = require('../lib/server');
const { runProgram } = require('../lib/run');

let server;
after(async () => {
  if (server) await server.cleanup();
});

test('bench load and run report every operation, with percentiles and a timeline', async () => {
  server = await startStore();
  const bin = haloclineBinary();
  const uri = server.uri();
  const load = await runProgram(bin, ['bench', 'load', '--uri', uri, '-p', 'recordcount=2000', '--threads', '4']);
  assert.equal(load.code, 0, load.stderr);
  const out = path.join(makeTempDir('halocline-bench-'), 'report.json');
  const run = await runProgram(bin, ['bench', 'run', '--uri', uri, '--workload', 'concentrated', '-p', 'recordcount=2000',
    '-p', 'operationcount=3000', '--threads', '4', '--json', out]);
  assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
  const report = JSON.parse(fs.readFileSync(out, 'utf8'));
  const ok = Object.values(report.operations).reduce((s, o) => s + o.ok, 0);
  assert.equal(ok, 3000, 'every operation is accounted for');
  assert.equal(report.failed, 0);
  assert.ok(report.operations.READ.ok > report.operations.UPDATE.ok);
  assert.ok(report.operations.READ.p99_us >= report.operations.READ.p50_us);
  assert.equal(report.per_second.reduce((a, b) => a + b, 0), 3000);
  assert.match(run.stdout, /throughput \d+ ops\/s/);
  const bad = await runProgram(bin, ['bench', 'run', '--uri', uri, '-p', 'bogus=1']);
  assert.equal(bad.code, 2);
});
