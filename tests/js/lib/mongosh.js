'use strict';
// Run mongosh non-interactively: `mongosh <uri> --quiet --norc --eval <js>` with a private
// HOME and a global config that turns off telemetry, update checks and the snippet index
// (the machine has no network). Bounded by a timeout; never leaves the child running.

const fs = require('node:fs');
const path = require('node:path');
const { makeTempDir } = require('./server');
const { runProgram } = require('./run');

const MONGOSH = path.resolve(__dirname, '..', 'node_modules', '.bin', 'mongosh');

let home = null;
function privateHome() {
  if (!home) {
    home = makeTempDir('halocline-mongosh-home-');
    fs.writeFileSync(
      path.join(home, 'mongosh.conf'),
      JSON.stringify({ forceDisableTelemetry: true, updateURL: '', snippetIndexSourceURLs: '' }),
    );
  }
  return home;
}

/** Resolves {code, signal, stdout, stderr, timedOut}. */
async function runMongosh(uri, script, { timeoutMs = 60_000, extraArgs = [] } = {}) {
  if (!fs.existsSync(MONGOSH)) throw new Error(`mongosh not installed at ${MONGOSH}; run npm ci --ignore-scripts in tests/js`);
  const h = privateHome();
  return runProgram(process.execPath, [MONGOSH, uri, '--quiet', '--norc', ...extraArgs, '--eval', script], {
    timeoutMs,
    env: {
      HOME: h,
      XDG_CONFIG_HOME: path.join(h, '.config'),
      MONGOSH_GLOBAL_CONFIG_FILE_FOR_TESTING: path.join(h, 'mongosh.conf'),
      MONGOSH_SKIP_NODE_VERSION_CHECK: '1',
      NO_COLOR: '1',
    },
  });
}

/** Runs a script whose last output line is JSON (print(JSON.stringify(x))); returns x. */
async function mongoshJson(uri, script, opts) {
  const r = await runMongosh(uri, script, opts);
  const out = `exit ${r.code}${r.timedOut ? ' (timed out)' : ''}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`;
  if (r.code !== 0) throw new Error(`mongosh failed: ${out}`);
  const lines = r.stdout.trim().split('\n');
  try {
    return JSON.parse(lines.at(-1));
  } catch {
    throw new Error(`mongosh printed no JSON: ${out}`);
  }
}

module.exports = { MONGOSH, runMongosh, mongoshJson };
