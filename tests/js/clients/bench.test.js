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

test('bench ramp doubles the threads until read p95 exceeds the threshold and reports the best step', async () => {
  const bin = haloclineBinary();
  const uri = server.uri();
  const out = path.join(makeTempDir('halocline-ramp-'), 'ramp.json');
  // A generous threshold: every step stays under it, so the ramp ends at --max-threads.
  const ramp = await runProgram(bin, ['bench', 'ramp', '--uri', uri, '--workload', 'readheavy', '-p', 'recordcount=2000',
    '--start-threads', '1', '--max-threads', '4', '--step-seconds', '1', '--p95-ms', '10000', '--json', out]);
  assert.equal(ramp.code, 0, `${ramp.stdout}\n${ramp.stderr}`);
  const report = JSON.parse(fs.readFileSync(out, 'utf8'));
  assert.equal(report.mode, 'ramp');
  assert.equal(report.p95_of, 'READ');
  assert.deepEqual(report.steps.map((s) => s.threads), [1, 2, 4]);
  for (const s of report.steps) {
    assert.equal(s.under, true);
    assert.equal(s.run.threads, s.threads);
    assert.equal(s.p95_us, s.run.operations.READ.p95_us);
  }
  const best = report.steps.reduce((a, b) => (b.ops_per_sec > a.ops_per_sec ? b : a));
  assert.equal(report.best.threads, best.threads);
  assert.match(ramp.stdout, /best under READ p95 10000 ms: \d+ ops\/s at \d+ threads/);
  assert.match(report.stop_reason, /max-threads 4/);
  // An impossible threshold: the first step is over it and nothing qualifies.
  const tight = await runProgram(bin, ['bench', 'ramp', '--uri', uri, '--workload', 'readheavy', '-p', 'recordcount=2000',
    '--start-threads', '2', '--max-threads', '8', '--step-seconds', '1', '--p95-ms', '0.001']);
  assert.equal(tight.code, 0, tight.stderr);
  assert.match(tight.stdout, /threads +2 .* OVER/);
  assert.match(tight.stdout, /no step kept READ p95 within 0.001 ms/);
  assert.doesNotMatch(tight.stdout, /threads +4/, 'the ramp stops at the first step over the threshold');
});
