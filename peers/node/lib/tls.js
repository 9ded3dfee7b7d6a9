'use strict';
// The TLS side of the launcher contract: --tls-listen HOST:PORT (repeatable),
// --tls-cert FILE, --tls-key FILE, checked and loaded as yard-serve does
// (docs/tls.md): each failure names its file.

const crypto = require('node:crypto');
const fs = require('node:fs');

// As yard-serve's default --tls-handshake-timeout: a client that never
// finishes its handshake is closed.
const HANDSHAKE_TIMEOUT_MS = 10000;

function fail(msg) {
  process.stderr.write(`yard-peer-node: ${msg}\n`);
  process.exit(1);
}

function readOrFail(flag, file) {
  try {
    return fs.readFileSync(file);
  } catch (err) {
    return fail(`${flag} ${file}: ${err.code === 'ENOENT' ? 'no such file or directory'
      : err.code === 'EACCES' ? 'permission denied' : err.message}`);
  }
}

// loadTLS returns the options of tls.createServer and https.createServer:
// the PEM chain and key, TLS 1.2 and 1.3 only, Node's (OpenSSL's) defaults
// otherwise; or exits 1 naming the file at fault.
function loadTLS(certFile, keyFile) {
  const cert = readOrFail('--tls-cert', certFile);
  const key = readOrFail('--tls-key', keyFile);
  let x509;
  try {
    x509 = new crypto.X509Certificate(cert);
  } catch (err) {
    fail(`--tls-cert ${certFile}: not a PEM certificate (${err.message})`);
  }
  let pkey;
  try {
    pkey = crypto.createPrivateKey(key);
  } catch (err) {
    fail(`--tls-key ${keyFile}: not a PEM private key (${err.message})`);
  }
  if (!x509.checkPrivateKey(pkey)) {
    fail(`--tls-key ${keyFile} is not the key of --tls-cert ${certFile}: key values mismatch`);
  }
  return {
    cert,
    key,
    minVersion: 'TLSv1.2',
    handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
  };
}

module.exports = { loadTLS };
