'use strict';
// Runs tests/integration/python/test_pymongo.py (which starts its own server) with Debian's
// /usr/bin/python3, the only interpreter that can import python3-pymongo.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { REPO_ROOT, haloclineBinary } = require('../lib/server');
const { runProgram } = require('../lib/run');

const PYTHON = process.env.HALO_PYTHON || '/usr/bin/python3';
const DIR = path.join(REPO_ROOT, 'tests', 'integration', 'python');

test('pymongo suite (tests/integration/python/test_pymongo.py)', { timeout: 600_000 }, async () => {
  assert.ok(fs.existsSync(PYTHON), `${PYTHON} not found`);
  const bin = haloclineBinary();
  assert.ok(bin, 'halocline binary not found');
  const r = await runProgram(PYTHON, ['-m', 'unittest', '-v', 'test_pymongo'], {
    cwd: DIR,
    timeoutMs: 590_000,
    env: { HALOCLINE_BIN: bin, PYTHONDONTWRITEBYTECODE: '1' },
  });
  // unittest writes its report to stderr; show it so failures are readable in the summary.
  const report = `${r.stdout}\n${r.stderr}`;
  if (r.code !== 0) process.stdout.write(report);
  assert.ok(!r.timedOut, `pymongo suite timed out\n${report}`);
  assert.equal(r.code, 0, `pymongo suite failed (exit ${r.code})\n${report.slice(-8000)}`);
  assert.match(r.stderr, /\nOK( \(skipped=\d+\))?\s*$/);
});
