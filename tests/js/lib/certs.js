'use strict';
// Test certificates, made at test time with the `openssl` CLI in a temp dir (removed at exit):
//  - a CA, and a server certificate it signed for localhost / 127.0.0.1 (subjectAltName),
//    whose PEM holds the certificate and its key, as --tlsCertificateKeyFile wants;
//  - a client certificate signed by the same CA (for client-certificate verification);
//  - a second, unrelated CA (a client trusting only it must refuse the server);
//  - the server key encrypted with a password (for --tlsCertificateKeyFilePassword).
// EC P-256 keys: generated in milliseconds.

const { execFileSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { makeTempDir } = require('./server');

const DAYS = '2';
const KEY_PASSWORD = 'halocline-test-password';

function openssl(args, cwd) {
  try {
    return execFileSync('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    const stderr = e.stderr ? e.stderr.toString() : '';
    throw new Error(`openssl ${args.join(' ')} failed (is the openssl package installed?): ${e.message}\n${stderr}`);
  }
}

function newKey(dir, name) {
  const file = path.join(dir, `${name}.key`);
  openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', file], dir);
  return file;
}

function selfSignedCa(dir, name, cn) {
  const key = newKey(dir, name);
  const cert = path.join(dir, `${name}.pem`);
  openssl(
    ['req', '-x509', '-new', '-key', key, '-out', cert, '-days', DAYS, '-subj', `/CN=${cn}`,
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'],
    dir,
  );
  return { key, cert };
}

/** A certificate for `cn` signed by `ca`, with the given extensions; returns {cert, key, pem}. */
function signed(dir, name, cn, ca, extensions) {
  const key = newKey(dir, name);
  const csr = path.join(dir, `${name}.csr`);
  const cert = path.join(dir, `${name}.crt`);
  const ext = path.join(dir, `${name}.ext`);
  fs.writeFileSync(ext, `${extensions.join('\n')}\n`);
  openssl(['req', '-new', '-key', key, '-out', csr, '-subj', `/CN=${cn}`], dir);
  openssl(
    ['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-set_serial',
      `0x${crypto.randomBytes(8).toString('hex')}`, '-days', DAYS, '-out', cert, '-extfile', ext],
    dir,
  );
  const pem = path.join(dir, `${name}.pem`);
  fs.writeFileSync(pem, fs.readFileSync(cert, 'utf8') + fs.readFileSync(key, 'utf8'));
  return { cert, key, pem };
}

/**
 * makeCerts() -> {dir, caFile, otherCaFile, serverPem, clientPem, wrongHostPem, foreignClientPem,
 *                 serverPemEncrypted, keyPassword}
 *  caFile        the CA's certificate: what clients (and --tlsCAFile) trust
 *  otherCaFile   an unrelated CA's certificate: trusting only it must fail
 *  serverPem     server certificate + key (localhost, 127.0.0.1, ::1)
 *  clientPem     client certificate + key, signed by caFile's CA
 *  wrongHostPem  server certificate + key from caFile's CA for elsewhere.example only
 *  foreignClientPem  client certificate + key from the other CA
 *  serverPemEncrypted  serverPem with the key encrypted under keyPassword
 */
function makeCerts() {
  const dir = makeTempDir('halocline-certs-');
  const ca = selfSignedCa(dir, 'ca', 'Halocline Test CA');
  const other = selfSignedCa(dir, 'other-ca', 'Some Other CA');
  const server = signed(dir, 'server', 'localhost', ca, [
    'basicConstraints=CA:FALSE',
    'keyUsage=critical,digitalSignature,keyEncipherment',
    'extendedKeyUsage=serverAuth,clientAuth',
    'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1',
  ]);
  // Signed by the right CA, but for another host: a client checking host names refuses it.
  const wrongHost = signed(dir, 'wrong-host', 'elsewhere.example', ca, [
    'basicConstraints=CA:FALSE',
    'keyUsage=critical,digitalSignature,keyEncipherment',
    'extendedKeyUsage=serverAuth',
    'subjectAltName=DNS:elsewhere.example',
  ]);
  const client = signed(dir, 'client', 'halocline-test-client', ca, [
    'basicConstraints=CA:FALSE',
    'keyUsage=critical,digitalSignature,keyEncipherment',
    'extendedKeyUsage=clientAuth',
  ]);
  // A client certificate from the other CA: a server verifying client certificates refuses it.
  const foreignClient = signed(dir, 'foreign-client', 'stranger', other, [
    'basicConstraints=CA:FALSE',
    'keyUsage=critical,digitalSignature,keyEncipherment',
    'extendedKeyUsage=clientAuth',
  ]);
  const encryptedKey = path.join(dir, 'server-encrypted.key');
  openssl(['pkcs8', '-topk8', '-in', server.key, '-out', encryptedKey, '-v2', 'aes-256-cbc',
    '-passout', `pass:${KEY_PASSWORD}`], dir);
  const serverPemEncrypted = path.join(dir, 'server-encrypted.pem');
  fs.writeFileSync(serverPemEncrypted, fs.readFileSync(server.cert, 'utf8') + fs.readFileSync(encryptedKey, 'utf8'));
  return {
    dir,
    caFile: ca.cert,
    otherCaFile: other.cert,
    serverPem: server.pem,
    clientPem: client.pem,
    wrongHostPem: wrongHost.pem,
    foreignClientPem: foreignClient.pem,
    serverPemEncrypted,
    keyPassword: KEY_PASSWORD,
  };
}

/** `halocline store` flags for a TLS listener (mode requireTLS unless given). */
function storeTlsArgs(certs, { mode = 'requireTLS', caFile, allowWithoutCert = false, pem = certs.serverPem } = {}) {
  const a = ['--tlsMode', mode, '--tlsCertificateKeyFile', pem];
  if (caFile) a.push('--tlsCAFile', caFile);
  if (allowWithoutCert) a.push('--tlsAllowConnectionsWithoutCertificates');
  return a;
}

module.exports = { makeCerts, storeTlsArgs };
