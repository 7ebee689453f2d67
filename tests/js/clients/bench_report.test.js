'use strict';
// `halocline bench report`: two real runs against a store become one self-contained HTML
// file; headless Chromium loads it (no network) and its DOM, after the page's script ran,
// must hold the plots: one throughput polyline per run and one latency polyline per run
// for every operation, each with real coordinates.
//
// Chromium is required (scripts/install-deps.sh installs Debian's `chromium`): without it
// this test FAILS rather than skips, so CI cannot pass without checking the plots.

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { startStore, makeTempDir, haloclineBinary } = require('../lib/server');
const { runProgram } = require('../lib/run');

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

let server;
after(async () => {
  if (server) await server.cleanup();
});

/** Loads `file` in headless Chromium and returns the DOM after its scripts ran. */
async function renderedDom(file, dir) {
  assert.ok(
    fs.existsSync(CHROMIUM),
    `headless Chromium not found at ${CHROMIUM}: install Debian's chromium (scripts/install-deps.sh) or set CHROMIUM`,
  );
  const r = await runProgram(
    CHROMIUM,
    [
      '--headless',
      '--disable-gpu',
      '--no-sandbox',
      '--no-first-run',
      '--disable-extensions',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      `--user-data-dir=${path.join(dir, 'chromium-profile')}`,
      '--dump-dom',
      `file://${file}`,
    ],
    { timeoutMs: 120_000 },
  );
  assert.equal(r.code, 0, `chromium failed (code ${r.code}, timedOut ${r.timedOut}):\n${r.stderr.slice(-2000)}`);
  return r.stdout;
}

/** Every <svg data-plot=...> in `dom` with its polylines' series names and points. */
function plots(dom) {
  const out = [];
  const svgRe = /<svg\b([^>]*)>([\s\S]*?)<\/svg>/g;
  let m;
  while ((m = svgRe.exec(dom))) {
    const attrs = m[1];
    const kind = /data-plot="([^"]+)"/.exec(attrs);
    if (!kind) continue;
    const op = /data-op="([^"]+)"/.exec(attrs);
    const series = [];
    for (const p of m[2].matchAll(/<polyline\b([^>]*)>/g)) {
      const name = /data-series="([^"]*)"/.exec(p[1]);
      const pts = /points="([^"]*)"/.exec(p[1]);
      const coords = (pts ? pts[1].trim().split(/\s+/) : []).filter(Boolean).map((xy) => xy.split(',').map(Number));
      series.push({ name: name && name[1], coords });
    }
    out.push({ kind: kind[1], op: op && op[1], series });
  }
  return out;
}

test('bench report plots two runs side by side, rendered by headless Chromium', async () => {
  server = await startStore();
  const bin = haloclineBinary();
  const uri = server.uri();
  const dir = makeTempDir('halocline-report-');
  const load = await runProgram(bin, ['bench', 'load', '--uri', uri, '-p', 'recordcount=3000', '--threads', '4']);
  assert.equal(load.code, 0, load.stderr);
  const runs = [
    ['archive alone', 'readheavy'],
    ['tiered', 'shop'],
  ];
  const files = [];
  for (const [label, workload] of runs) {
    const out = path.join(dir, `${workload}.json`);
    const r = await runProgram(bin, ['bench', 'run', '--uri', uri, '--workload', workload, '-p', 'recordcount=3000',
      '--threads', '4', '--seconds', '3', '--label', label, '--json', out]);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    files.push(out);
  }
  // What `bench reproduce` adds to each run: the cost per operation (a proxy that does not
  // report archive round trips yet shows n/a; the alone side has no proxy and no fast tier).
  const withCost = (file, fields) => {
    const run = JSON.parse(fs.readFileSync(file, 'utf8'));
    fs.writeFileSync(file, JSON.stringify({ ...run, ...fields }));
  };
  withCost(files[0], {
    measured_ops: 1000,
    cpu_us_per_op: { client: 101.4, proxy: null, fast: null, archive: 210 },
    round_trips_per_op: null,
  });
  withCost(files[1], {
    measured_ops: 1000,
    cpu_us_per_op: { client: 99, proxy: 80.2, fast: 40, archive: 150 },
    round_trips_per_op: { fast: 1.234, archive: null },
  });
  const html = path.join(dir, 'report.html');
  const rep = await runProgram(bin, ['bench', 'report', '--out', html, ...files]);
  assert.equal(rep.code, 0, rep.stderr);
  const page = fs.readFileSync(html, 'utf8');
  assert.doesNotMatch(page, /\s(src|href)=/, 'self-contained: nothing loaded from elsewhere');

  const dom = await renderedDom(html, dir);
  assert.match(dom, /<body[^>]*data-rendered="ok"/, 'the page script drew every plot without error');
  const all = plots(dom);
  const throughput = all.filter((p) => p.kind === 'throughput');
  assert.equal(throughput.length, 1);
  assert.deepEqual(throughput[0].series.map((s) => s.name).sort(), ['archive alone', 'tiered']);
  for (const s of throughput[0].series) {
    assert.equal(s.coords.length, 3, `${s.name}: one point per measured second`);
    for (const [x, y] of s.coords) assert.ok(Number.isFinite(x) && Number.isFinite(y), `${s.name}: ${x},${y}`);
    assert.ok(new Set(s.coords.map(([x]) => x)).size === 3, 'points spread along the time axis');
  }
  const latency = all.filter((p) => p.kind === 'latency');
  const ops = latency.map((p) => p.op).sort();
  assert.deepEqual(ops, ['INSERT', 'READ', 'UPDATE'], 'a latency plot per operation');
  for (const p of latency) {
    const want = p.op === 'INSERT' ? ['tiered'] : ['archive alone', 'tiered']; // readheavy has no inserts
    assert.deepEqual(p.series.map((s) => s.name).sort(), want, p.op);
    for (const s of p.series) {
      assert.equal(s.coords.length, 4, `${p.op} ${s.name}: p50, p95, p99, p99.9`);
      for (const [x, y] of s.coords) assert.ok(Number.isFinite(x) && Number.isFinite(y));
      // Higher percentiles are never lower latency: y grows downwards in SVG.
      for (let i = 1; i < 4; i++) assert.ok(s.coords[i][1] <= s.coords[i - 1][1] + 1e-6, `${p.op} ${s.name} monotone`);
    }
  }
  assert.match(dom, /<table>[\s\S]*archive alone[\s\S]*<\/table>/, 'the numbers table is there too');
  assert.match(dom, /<th>NOT_FOUND<\/th>/, 'the numbers table has a NOT_FOUND column');
  const cost = /<table data-table="cost">([\s\S]*?)<\/table>/.exec(dom);
  assert.ok(cost, 'the cost-per-operation table is drawn');
  const rows = [...cost[1].matchAll(/<tr>([\s\S]*?)<\/tr>/g)].map((m) => [...m[1].matchAll(/<t[dh]>([^<]*)<\/t[dh]>/g)].map((c) => c[1]));
  assert.deepEqual(rows, [
    ['system', 'CPU us/op client', 'proxy', 'fast', 'archive', 'all', 'round trips/op fast', 'archive'],
    ['archive alone', '101', '-', '-', '210', '311', '-', '-'],
    ['tiered', '99', '80', '40', '150', '369', '1.23', 'n/a'],
  ]);

  const bad = await runProgram(bin, ['bench', 'report', '--out', path.join(dir, 'x.html'), html]);
  assert.equal(bad.code, 2, 'a file that is not a run report is refused');
});
