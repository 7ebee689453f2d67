'use strict';
// `halocline bench reproduce --quick` end to end: the CI smoke test of the whole
// benchmark path. Figures are printed, never asserted; what is asserted is that every
// scenario ran, nothing failed, the archive's confinement was either applied or
// announced as missing (never silent), and the outputs (table, JSON, HTML) exist.
//
// 1. "archive-alone and direct sides" runs with --skip-tiered and needs only stores.
// 2. "the whole reproduction, tiered side included" needs `halocline proxy`: it FAILS
//    until the binary has the proxy subcommand (reproduce exits 4 and says so). Every
//    assertion in it about the tiered/proxy side depends on the proxy.
// Both share one data directory: the first loads the quick datasets, the second must
// reuse them.

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { makeTempDir, haloclineBinary } = require('../lib/server');
const { runProgram } = require('../lib/run');

const dataDir = makeTempDir('halocline-reproduce-');
const TIMEOUT_MS = 9 * 60_000; // --quick must take < 5 min; slack for a loaded CI machine

after(() => {
  // Leftover working copies or cgroups would mean a child outlived the run.
  const left = fs.existsSync(dataDir) ? fs.readdirSync(dataDir).filter((n) => n.startsWith('work-')) : [];
  assert.deepEqual(left, [], 'working copies are removed');
});

async function reproduce(extra) {
  const out = path.join(dataDir, `results-${extra.length ? 'alone' : 'full'}`);
  const r = await runProgram(haloclineBinary(), ['bench', 'reproduce', '--quick', '--data-dir', dataDir, '--out', out, ...extra], {
    timeoutMs: TIMEOUT_MS,
  });
  const log = `--- stdout ---\n${r.stdout.slice(-6000)}\n--- stderr ---\n${r.stderr.slice(-3000)}`;
  return { ...r, out, log };
}

/** Checks common to both runs; returns the parsed reproduce.json. */
function checkOutputs(r) {
  assert.equal(r.timedOut, false, `reproduce --quick took over ${TIMEOUT_MS / 60000} min\n${r.log}`);
  assert.equal(r.code, 0, r.log);
  // Confinement is either applied or announced, loudly.
  assert.ok(
    /archive confinement: 3000 read IOPS on disk \d+:\d+/.test(r.stdout) || /UNCONFINED/.test(r.stdout),
    `the archive's IOPS cap is applied or its absence announced\n${r.log}`,
  );
  assert.match(r.stdout, /ratio = tiered \/ alone/, 'the ratio table is printed');
  const json = JSON.parse(fs.readFileSync(path.join(r.out, 'reproduce.json'), 'utf8'));
  assert.equal(json.quick, true);
  if (!json.confined) assert.match(r.stdout, /UNCONFINED RUN/);
  assert.ok(json.figures.length > 10, 'a row per published figure');
  assert.equal(json.failed, 0);
  assert.equal(json.not_found, 0, 'every key the runs looked up exists, on both sides');
  assert.doesNotMatch(r.stdout, /NOT_FOUND in /);
  for (const run of json.runs) {
    const name = `${run.scenario} ${run.side} #${run.round}`;
    assert.equal(run.run.failed, 0, `${name}: no operation failed or was refused`);
    assert.equal(run.run.not_found, 0, `${name}: no operation found nothing`);
    assert.ok(run.run.ops_per_sec > 0, `${name} did work`);
    assert.ok(run.run.per_second.length >= 2, 'a per-second timeline');
    // CPU per operation of the client and of every process the side has, never of others.
    const cpu = run.run.cpu_us_per_op;
    const viaProxy = ['tiered', 'proxy', 'running', 'paused'].includes(run.side);
    assert.ok(run.run.measured_ops > 0, name);
    assert.ok(cpu.client > 0, `${name}: client CPU per op ${cpu.client}`);
    assert.ok(cpu.archive >= 0, `${name}: archive CPU per op ${cpu.archive}`);
    for (const p of ['proxy', 'fast']) {
      if (viaProxy) assert.ok(cpu[p] >= 0, `${name}: ${p} CPU per op ${cpu[p]}`);
      else assert.equal(cpu[p], null, `${name}: no ${p} process`);
    }
    // Round trips: only through a proxy, from its haloclineStatus counters.
    if (!viaProxy) assert.equal(run.run.round_trips_per_op, null, name);
    else {
      for (const t of ['fast', 'archive']) {
        const v = run.run.round_trips_per_op[t];
        assert.ok(typeof v === 'number' && v >= 0, `${name}: ${t} round trips per op ${v}`);
      }
      // Tiered: every operation asks the fast tier at least once; pass-through: the archive.
      // The counters come from haloclineStatus probes on their own connection, so the
      // window's edges blur the ratio: by a few percent on an idle machine, by up to ~10%
      // in quick mode's short windows when other work competes for the two cores.
      const busy = run.side === 'proxy' ? 'archive' : 'fast';
      assert.ok(run.run.round_trips_per_op[busy] >= 0.8, `${name}: ${busy} round trips per op ${run.run.round_trips_per_op[busy]}`);
    }
  }
  assert.match(r.stdout, /CPU us\/op client\|proxy\|fast\|archive +\d+\|-\|-\|\d+/, 'per-run line and table rows');
  const costRows = json.figures.filter((f) => f.metric === 'CPU us/op client|proxy|fast|archive');
  assert.ok(costRows.length >= 6, 'a CPU row per scenario');
  assert.ok(json.figures.filter((f) => f.metric === 'round trips/op fast|archive').length === costRows.length);
  const html = fs.readFileSync(path.join(r.out, 'report.html'), 'utf8');
  assert.match(html, /data-section="0"/);
  assert.doesNotMatch(html, /\s(src|href)=/, 'the report is self-contained');
  return json;
}

function sides(json, scenario) {
  return json.runs.filter((x) => x.scenario === scenario).map((x) => `${x.side}#${x.round}`);
}

test('bench reproduce --quick: archive-alone and direct sides (no proxy needed)', { timeout: TIMEOUT_MS + 60_000 }, async () => {
  const r = await reproduce(['--skip-tiered']);
  const json = checkOutputs(r);
  assert.equal(json.tiered, false);
  assert.match(r.stdout, /--skip-tiered: only the archive-alone and direct sides run/);
  for (const s of ['shop', 'readheavy', 'concentrated', 'fixed', 'cold']) {
    assert.deepEqual(sides(json, s), ['alone#1', 'alone#2'], s);
  }
  assert.deepEqual(sides(json, 'pause'), [], 'the feeder scenario needs the tiered side');
  assert.deepEqual(sides(json, 'overhead'), ['direct#1', 'direct#2']);
  assert.deepEqual(sides(json, 'overhead-1'), ['direct#1', 'direct#2']);
  const fixed = json.runs.find((x) => x.scenario === 'fixed');
  assert.equal(fixed.run.target_ops_per_sec, json.fixed_target_ops_per_sec, 'fixed load runs at the alone maximum');
  if (json.confined) {
    for (const run of json.runs.filter((x) => x.side === 'alone')) {
      assert.ok(run.disk_reads_per_sec >= 0, 'archive disk reads are read from the cgroup counters');
    }
  }
});

test('bench reproduce --quick: the whole reproduction, tiered side included [NEEDS halocline proxy]', { timeout: TIMEOUT_MS + 60_000 }, async () => {
  const r = await reproduce([]);
  // Until the proxy lands this is where it fails: reproduce exits 4 with a clear message.
  assert.notEqual(r.code, 4, `halocline proxy is missing: the tiered side cannot run yet\n${r.log}`);
  const json = checkOutputs(r);
  assert.match(r.stdout, /dataset archive-200000x10x\d+: reused/, 'the dataset loaded by the first test is reused');
  assert.equal(json.tiered, true);
  for (const s of ['shop', 'readheavy', 'concentrated', 'fixed', 'cold']) {
    assert.deepEqual(sides(json, s), ['alone#1', 'tiered#1', 'alone#2', 'tiered#2'], `${s}: A B A B`);
  }
  assert.deepEqual(sides(json, 'overhead'), ['direct#1', 'proxy#1', 'direct#2', 'proxy#2']);
  // The feeder paused for a whole run (issue 18): the tiered side alone, running then paused;
  // checkOutputs has asserted that no operation of either failed.
  assert.deepEqual(sides(json, 'pause'), ['running#1', 'paused#1', 'running#2', 'paused#2']);
  assert.ok(json.figures.some((f) => f.scenario.startsWith('feeder paused') && f.metric === 'failed operations'));
  for (const f of json.figures) assert.notEqual(f.tiered, 'skipped', `${f.scenario} ${f.metric}`);
  for (const run of json.runs.filter((x) => x.scenario === 'cold' && x.side === 'tiered')) {
    assert.ok(run.fast_docs >= 0, 'the fast tier was counted after each cold-start run');
  }
  for (const f of json.figures.filter((x) => x.metric === 'round trips/op fast|archive')) {
    assert.match(f.tiered, /^(\d+\.\d\d|n\/a)\|(\d+\.\d\d|n\/a)$/, `${f.scenario}: round trips through the proxy`);
  }
  for (const f of json.figures.filter((x) => x.metric === 'CPU us/op client|proxy|fast|archive')) {
    assert.match(f.tiered, /^\d+\|\d+\|\d+\|\d+$/, `${f.scenario}: every process's CPU through the proxy`);
    assert.match(f.ratio, /^\d+\.\d\dx$/);
  }
  const html = fs.readFileSync(path.join(r.out, 'report.html'), 'utf8');
  assert.match(html, /"label":"tiered #1"/);
  assert.match(html, /"label":"proxy #1"/);
});
