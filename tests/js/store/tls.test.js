'use strict';
// TLS on the store's listener, with mongod's options (--tlsMode, --tlsCertificateKeyFile,
// --tlsCAFile, --tlsAllowConnectionsWithoutCertificates, net.tls.* in YAML), driven by real
// clients: the Node driver, mongosh and pymongo. Certificates are made at test time
// (lib/certs.js). Each refusal is checked from both sides: the client fails and the store
// says why in its log.

const { test, before, after, describe } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { MongoClient } = require('mongodb');
const { startStore, makeTempDir, haloclineBinary, parseLogLine } = require('../lib/server');
const { runProgram } = require('../lib/run');
const { makeCerts, storeTlsArgs } = require('../lib/certs');

const MONGOSH = path.resolve(__dirname, '..', 'node_modules', '.bin', 'mongosh');
const PYTHON = process.env.HALO_PYTHON || '/usr/bin/python3';
const OK_TIMEOUTS = { serverSelectionTimeoutMS: 10_000, connectTimeoutMS: 10_000 };
// A client that must fail: short, so the suite does not wait long for each refusal.
const FAIL_TIMEOUTS = { serverSelectionTimeoutMS: 2_000, connectTimeoutMS: 2_000 };

let certs;
const servers = [];
const clients = [];

before(() => {
  certs = makeCerts();
});
after(async () => {
  for (const c of clients) await c.close(true).catch(() => {});
  const errors = [];
  for (const s of servers) await s.cleanup().catch((e) => errors.push(e));
  if (errors.length) throw errors[0];
});

async function store(extraArgs, opts = {}) {
  const s = await startStore({ extraArgs, ...opts });
  servers.push(s);
  return s;
}

async function connect(uri, options = {}) {
  const c = new MongoClient(uri, { ...OK_TIMEOUTS, ...options });
  clients.push(c);
  await c.connect();
  return c;
}

/** Connecting must fail; returns the error. */
async function connectFails(uri, options = {}) {
  const c = new MongoClient(uri, { ...FAIL_TIMEOUTS, ...options });
  clients.push(c);
  let err = null;
  try {
    await c.connect();
    await c.db('admin').command({ ping: 1 });
  } catch (e) {
    err = e;
  }
  assert.ok(err, `expected the connection to ${uri} with ${JSON.stringify(options)} to fail`);
  return err;
}

/** Resolves with the first log record of `server` whose msg includes `text` (from now on). */
function logLine(server, text) {
  return server.proc.waitForLine((line) => {
    const rec = parseLogLine(line);
    return rec && rec.msg && rec.msg.includes(text) ? rec : undefined;
  }, 30_000);
}

async function crud(client, tag) {
  const coll = client.db('tls').collection(`crud_${tag}`);
  await coll.insertMany([{ _id: 1, v: 'a' }, { _id: 2, v: 'b' }]);
  assert.equal((await coll.updateOne({ _id: 2 }, { $set: { v: 'B' } })).modifiedCount, 1);
  assert.deepEqual(await coll.find().sort({ _id: 1 }).toArray(), [{ _id: 1, v: 'a' }, { _id: 2, v: 'B' }]);
  assert.equal((await coll.deleteOne({ _id: 1 })).deletedCount, 1);
  assert.equal(await coll.countDocuments({}), 1);
}

describe('requireTLS', () => {
  let server;
  before(async () => {
    server = await store(storeTlsArgs(certs));
  });

  test('the Node driver with tls and tlsCAFile does CRUD; the log says ssl on', async () => {
    const c = await connect(server.uri(), { tls: true, tlsCAFile: certs.caFile });
    await crud(c, 'node');
    // The certificate names localhost too.
    const byName = await connect(`mongodb://localhost:${server.port}/?directConnection=true`, {
      tls: true,
      tlsCAFile: certs.caFile,
    });
    assert.equal((await byName.db('tls').collection('crud_node').findOne({ _id: 2 })).v, 'B');
    const ready = server.proc.stdoutTail.map(parseLogLine).find((r) => r && r.msg === 'Waiting for connections');
    assert.equal(ready.attr.ssl, 'on');
  });

  test('a plain connection is refused and logged', async () => {
    const logged = logLine(server, 'Plain connection refused');
    const err = await connectFails(server.uri());
    assert.match(err.name, /MongoServerSelectionError|MongoNetworkError/, err.stack);
    const rec = await logged;
    assert.match(rec.msg, /requireTLS/);
  });

  test('a client that does not trust the CA fails the handshake', async () => {
    const logged = logLine(server, 'TLS handshake failed');
    const err = await connectFails(server.uri(), { tls: true, tlsCAFile: certs.otherCaFile });
    assert.match(String(err.message), /certificate|self.signed|issuer/i, err.stack);
    await logged;
    // Nor does one with the system's CAs only.
    await connectFails(server.uri(), { tls: true });
  });

  test('mongosh --tls --tlsCAFile works', async () => {
    assert.ok(fs.existsSync(MONGOSH), `mongosh not installed at ${MONGOSH}`);
    const script = "db.getSiblingDB('tls').sh.insertOne({_id: 1, via: 'mongosh'}); " +
      "print(JSON.stringify(db.getSiblingDB('tls').sh.findOne({_id: 1})))";
    const r = await mongosh(server.uri(), ['--tls', '--tlsCAFile', certs.caFile], script);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.deepEqual(JSON.parse(r.stdout.trim().split('\n').pop()), { _id: 1, via: 'mongosh' });
    const plain = await mongosh(server.uri({ serverSelectionTimeoutMS: '2000' }), [], 'db.runCommand({ping: 1})');
    assert.notEqual(plain.code, 0, 'mongosh without --tls must fail');
  });

  test('pymongo with tls=True and tlsCAFile works', async () => {
    assert.ok(fs.existsSync(PYTHON), `${PYTHON} not found`);
    const script = [
      'import sys, pymongo',
      'c = pymongo.MongoClient(sys.argv[1], tls=True, tlsCAFile=sys.argv[2], serverSelectionTimeoutMS=10000)',
      "coll = c.tls.py",
      "coll.insert_one({'_id': 1, 'via': 'pymongo'})",
      "print(coll.find_one({'_id': 1})['via'])",
      'c.close()',
    ].join('\n');
    const r = await runProgram(PYTHON, ['-c', script, server.uri(), certs.caFile], { timeoutMs: 60_000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.equal(r.stdout.trim(), 'pymongo');
  });

  test('halocline bench (libmongoc) loads over TLS with the options in its URI', async () => {
    const uri = server.uri({ tls: 'true', tlsCAFile: certs.caFile });
    const r = await runProgram(haloclineBinary(), ['bench', 'load', '--uri', uri, '-p', 'recordcount=200', '--threads', '2'], {
      timeoutMs: 120_000,
    });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const c = await connect(server.uri(), { tls: true, tlsCAFile: certs.caFile });
    assert.equal(await c.db('ycsb').collection('usertable').countDocuments({}), 200);
  });
});

test('preferTLS and allowTLS accept TLS and plain clients on one port', async () => {
  for (const mode of ['preferTLS', 'allowTLS']) {
    const server = await store(storeTlsArgs(certs, { mode }));
    const tls = await connect(server.uri(), { tls: true, tlsCAFile: certs.caFile });
    const plain = await connect(server.uri());
    await tls.db('tls').collection(mode).insertOne({ _id: 'tls' });
    await plain.db('tls').collection(mode).insertOne({ _id: 'plain' });
    const ids = (await plain.db('tls').collection(mode).find().sort({ _id: 1 }).toArray()).map((d) => d._id);
    assert.deepEqual(ids, ['plain', 'tls'], mode);
  }
});

test('with --tlsCAFile a client must present a certificate from that CA', async () => {
  const server = await store(storeTlsArgs(certs, { caFile: certs.caFile }));
  const logged = logLine(server, 'TLS handshake failed');
  await connectFails(server.uri(), { tls: true, tlsCAFile: certs.caFile });
  await logged;
  const withCert = await connect(server.uri(), {
    tls: true,
    tlsCAFile: certs.caFile,
    tlsCertificateKeyFile: certs.clientPem,
  });
  await crud(withCert, 'clientcert');

  // --tlsAllowConnectionsWithoutCertificates: a certificate is checked if sent, not required.
  const lenient = await store(storeTlsArgs(certs, { caFile: certs.caFile, allowWithoutCert: true }));
  await crud(await connect(lenient.uri(), { tls: true, tlsCAFile: certs.caFile }), 'nocert');
  await connect(lenient.uri(), { tls: true, tlsCAFile: certs.caFile, tlsCertificateKeyFile: certs.clientPem });
  // A certificate from another CA is still refused.
  const logged2 = logLine(lenient, 'TLS handshake failed');
  await connectFails(lenient.uri(), { tls: true, tlsCAFile: certs.caFile, tlsCertificateKeyFile: certs.foreignClientPem });
  await logged2;
});

test('net.tls in a YAML config, with an encrypted key and its password', async () => {
  const dir = makeTempDir('halocline-tlsconf-');
  const conf = path.join(dir, 'store.conf');
  fs.writeFileSync(
    conf,
    [
      'net:',
      '  tls:',
      '    mode: requireTLS',
      `    certificateKeyFile: ${JSON.stringify(certs.serverPemEncrypted)}`,
      `    certificateKeyFilePassword: ${JSON.stringify(certs.keyPassword)}`,
      `    CAFile: ${JSON.stringify(certs.caFile)}`,
      '    allowConnectionsWithoutCertificates: true',
      '',
    ].join('\n'),
  );
  const server = await store(['--config', conf]);
  await crud(await connect(server.uri(), { tls: true, tlsCAFile: certs.caFile }), 'yaml');
  await connectFails(server.uri());
});

test('a TLS client against a plain store fails and the store says why', async () => {
  const server = await store([]);
  const logged = logLine(server, 'TLS handshake received but net.tls.mode is disabled');
  await connectFails(server.uri(), { tls: true, tlsCAFile: certs.caFile });
  await logged;
  await crud(await connect(server.uri()), 'plainstore');
});

describe('invalid TLS settings are refused at start, naming the option', () => {
  const bin = () => haloclineBinary();
  const refused = async (args, pattern) => {
    const dbpath = makeTempDir('halocline-tlsbad-');
    const r = await runProgram(bin(), ['store', '--port', '0', '--dbpath', dbpath, ...args], { timeoutMs: 60_000 });
    assert.ok(!r.timedOut, `the store started with ${args.join(' ')}`);
    assert.notEqual(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(`${r.stdout}\n${r.stderr}`, pattern);
  };

  test('requireTLS without a certificate', () =>
    refused(['--tlsMode', 'requireTLS'], /--tlsCertificateKeyFile\)?: required when net\.tls\.mode/));
  test('a missing certificate file', () =>
    refused(['--tlsMode', 'requireTLS', '--tlsCertificateKeyFile', '/nonexistent/server.pem'],
      /tlsCertificateKeyFile\)?: cannot read '\/nonexistent\/server\.pem'/));
  test('a file that is not PEM', async () => {
    const f = path.join(makeTempDir('halocline-tlsbad-'), 'bad.pem');
    fs.writeFileSync(f, 'hello\n');
    await refused(['--tlsMode', 'preferTLS', '--tlsCertificateKeyFile', f], /holds no usable PEM certificate/);
  });
  test('an encrypted key without its password, or with a wrong one', async () => {
    await refused(['--tlsMode', 'requireTLS', '--tlsCertificateKeyFile', certs.serverPemEncrypted],
      /no usable private key \(an encrypted key needs net\.tls\.certificateKeyFilePassword/);
    await refused(['--tlsMode', 'requireTLS', '--tlsCertificateKeyFile', certs.serverPemEncrypted,
      '--tlsCertificateKeyFilePassword', 'wrong'], /no usable private key \(or the password is wrong\)/);
  });
  test('a missing CA file', () =>
    refused([...storeTlsArgs(certs), '--tlsCAFile', '/nonexistent/ca.pem'], /tlsCAFile\)?: cannot read/));
  test('a certificate with TLS disabled', () =>
    refused(['--tlsCertificateKeyFile', certs.serverPem], /is set but net\.tls\.mode \(--tlsMode\) is disabled/));
  test('an unknown mode', async () => {
    await refused(['--tlsMode', 'requireSSL'], /tlsMode/);
    const conf = path.join(makeTempDir('halocline-tlsbad-'), 'bad.conf');
    fs.writeFileSync(conf, 'net:\n  tls:\n    mode: sometimes\n');
    await refused(['--config', conf], /net\.tls\.mode: must be disabled, allowTLS, preferTLS or requireTLS/);
  });
});

/** Runs mongosh with a private HOME; resolves {code, stdout, stderr}. */
function mongosh(uri, extraArgs, script) {
  const home = makeTempDir('halocline-mongosh-home-');
  const globalConfig = path.join(home, 'mongosh.conf');
  fs.writeFileSync(globalConfig, JSON.stringify({ forceDisableTelemetry: true, updateURL: '', snippetIndexSourceURLs: '' }));
  return runProgram(process.execPath, [MONGOSH, uri, '--quiet', '--norc', ...extraArgs, '--eval', script], {
    timeoutMs: 60_000,
    env: {
      HOME: home,
      XDG_CONFIG_HOME: path.join(home, '.config'),
      MONGOSH_GLOBAL_CONFIG_FILE_FOR_TESTING: globalConfig,
      MONGOSH_SKIP_NODE_VERSION_CHECK: '1',
      NO_COLOR: '1',
    },
  });
}
