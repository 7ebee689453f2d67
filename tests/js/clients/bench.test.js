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
  assert.equal(report.not_found, 0, 'every key read or updated exists');
  assert.equal(report.overall.not_found, 0);
  for (const [op, o] of Object.entries(report.operations)) assert.equal(o.not_found, 0, op);
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

/** `bench run` over `collection`; returns {run, report}. */
async function benchRun(uri, args, collection) {
  const out = path.join(makeTempDir('halocline-bench-'), 'report.json');
  const threads = args.includes('--threads') ? [] : ['--threads', '4'];
  const run = await runProgram(haloclineBinary(), ['bench', 'run', '--uri', uri, '--collection', collection, ...threads,
    '--json', out, ...args]);
  const report = fs.existsSync(out) ? JSON.parse(fs.readFileSync(out, 'utf8')) : null;
  return { run, report, log: `${run.stdout}\n${run.stderr}` };
}

test('inserts racing reads of the newest keys (shop, latest) find every document: no NOT_FOUND', async () => {
  const uri = server.uri();
  const load = await runProgram(haloclineBinary(), ['bench', 'load', '--uri', uri, '--collection', 'shop',
    '-p', 'recordcount=1000', '--threads', '4']);
  assert.equal(load.code, 0, load.stderr);
  // 30% inserts: the most popular key is the newest, so a read of a record whose insert is
  // still in flight would miss if the client chose keys among inserts not yet acknowledged.
  const { run, report, log } = await benchRun(uri, ['--workload', 'shop', '-p', 'recordcount=1000', '-p', 'operationcount=4000',
    '-p', 'readproportion=0.6', '-p', 'updateproportion=0.1', '-p', 'insertproportion=0.3'], 'shop');
  assert.equal(run.code, 0, log);
  assert.equal(report.failed, 0);
  assert.equal(report.not_found, 0, log);
  assert.ok(report.operations.INSERT.ok > 800, 'inserts did run');
});

test('a run over more records than were loaded counts NOT_FOUND for reads and updates, and fails with exit status 5', async () => {
  const uri = server.uri();
  const load = await runProgram(haloclineBinary(), ['bench', 'load', '--uri', uri, '--collection', 'half',
    '-p', 'recordcount=1000', '--threads', '4']);
  assert.equal(load.code, 0, load.stderr);
  // Keys are chosen uniformly among 2,000 records; only the first 1,000 exist.
  const args = ['--workload', 'readheavy', '-p', 'recordcount=2000', '-p', 'requestdistribution=uniform', '-p', 'operationcount=2000'];
  const { run, report, log } = await benchRun(uri, args, 'half');
  assert.equal(run.code, 5, log);
  assert.equal(report.failed, 0);
  assert.equal(report.expect_misses, false);
  const { READ, UPDATE } = report.operations;
  assert.equal(READ.ok + READ.not_found + UPDATE.ok + UPDATE.not_found, 2000, 'every operation is ok or NOT_FOUND');
  assert.equal(report.not_found, READ.not_found + UPDATE.not_found);
  assert.equal(report.overall.not_found, report.not_found);
  assert.equal(report.overall.ok, READ.ok + UPDATE.ok, 'NOT_FOUND is not counted as ok');
  assert.ok(report.not_found > 800 && report.not_found < 1200, `about half miss: ${report.not_found}`);
  assert.ok(READ.not_found > 0 && UPDATE.not_found > 0, 'reads and updates both count misses');
  assert.match(run.stdout, /NOT_FOUND \(READ \d+, UPDATE \d+\): these operations found no document/);
  assert.match(run.stdout, new RegExp(`${report.not_found} NOT_FOUND`));

  // Where misses are the point, they are still counted and shown, but the run succeeds.
  const expected = await benchRun(uri, [...args, '--expect-misses'], 'half');
  assert.equal(expected.run.code, 0, expected.log);
  assert.equal(expected.report.expect_misses, true);
  assert.ok(expected.report.not_found > 800, 'still counted');
  assert.match(expected.run.stdout, /expected \(--expect-misses\)/);
});

test('on an empty collection every read and update is NOT_FOUND, exactly', async () => {
  const uri = server.uri();
  const { run, report, log } = await benchRun(uri, ['--workload', 'readheavy', '-p', 'recordcount=500', '-p', 'operationcount=600'],
    'nothing');
  assert.equal(run.code, 5, log);
  assert.equal(report.not_found, 600);
  assert.equal(report.overall.ok, 0);
  assert.equal(report.operations.READ.not_found + report.operations.UPDATE.not_found, 600);
  assert.equal(report.operations.READ.p50_us, 0, 'misses stay out of the latency percentiles');

  // A failed operation outranks a miss: exit status 3 (an insert of a duplicate key fails).
  const dup = await benchRun(uri, ['--workload', 'readheavy', '-p', 'recordcount=500', '-p', 'operationcount=50',
    '-p', 'readproportion=0', '-p', 'updateproportion=0', '-p', 'insertproportion=1', '--threads', '1'], 'shop');
  assert.equal(dup.run.code, 3, dup.log);
  assert.ok(dup.report.failed > 0);

  // The ramp stops at the first step with NOT_FOUND, never counts it as under, and fails.
  const out = path.join(makeTempDir('halocline-ramp-'), 'ramp.json');
  const ramp = await runProgram(haloclineBinary(), ['bench', 'ramp', '--uri', uri, '--collection', 'nothing', '--workload', 'readheavy',
    '-p', 'recordcount=500', '--start-threads', '1', '--max-threads', '4', '--step-seconds', '1', '--p95-ms', '10000', '--json', out]);
  assert.equal(ramp.code, 5, `${ramp.stdout}\n${ramp.stderr}`);
  const rj = JSON.parse(fs.readFileSync(out, 'utf8'));
  assert.equal(rj.steps.length, 1);
  assert.ok(rj.steps[0].not_found > 0);
  assert.equal(rj.steps[0].under, false);
  assert.equal(rj.best, null);
  assert.match(ramp.stdout, /threads +1 .* OVER \(\d+ NOT_FOUND\)/);
  assert.match(rj.stop_reason, /NOT_FOUND: READ \d+/);
});
