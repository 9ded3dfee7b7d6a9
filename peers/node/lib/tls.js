'use strict';
// The TLS side of the launcher contract: --tls-listen HOST:PORT (repeatable),
// --tls-cert FILE, --tls-key FILE, checked and loaded as yard-serve does
// (docs/tls.md): each failure names its file. SIGHUP loads them again.

const crypto = require('node:crypto');
const fs = require('node:fs');

// As yard-serve's default --tls-handshake-timeout: a client that never
// finishes its handshake is closed.
const HANDSHAKE_TIMEOUT_MS = 10000;

function readFile(flag, file) {
  try {
    return fs.readFileSync(file);
  } catch (err) {
    throw new Error(`${flag} ${file}: ${err.code === 'ENOENT' ? 'no such file or directory'
      : err.code === 'EACCES' ? 'permission denied' : err.message}`);
  }
}

// readPair returns the PEM chain and key once checked (each a certificate
// or a key, and the key the certificate's), or throws an Error naming the
// file at fault.
function readPair(certFile, keyFile) {
  const cert = readFile('--tls-cert', certFile);
  const key = readFile('--tls-key', keyFile);
  let x509;
  try {
    x509 = new crypto.X509Certificate(cert);
  } catch (err) {
    throw new Error(`--tls-cert ${certFile}: not a PEM certificate (${err.message})`);
  }
  let pkey;
  try {
    pkey = crypto.createPrivateKey(key);
  } catch (err) {
    throw new Error(`--tls-key ${keyFile}: not a PEM private key (${err.message})`);
  }
  if (!x509.checkPrivateKey(pkey)) {
    throw new Error(`--tls-key ${keyFile} is not the key of --tls-cert ${certFile}: `
      + 'key values mismatch');
  }
  return { cert, key };
}

// loadTLS returns the options of tls.createServer and https.createServer:
// the PEM chain and key, TLS 1.2 and 1.3 only, Node's (OpenSSL's) defaults
// otherwise; or exits 1 naming the file at fault.
function loadTLS(certFile, keyFile) {
  let pair;
  try {
    pair = readPair(certFile, keyFile);
  } catch (err) {
    process.stderr.write(`yard-peer-node: ${err.message}\n`);
    process.exit(1);
  }
  return {
    ...pair,
    minVersion: 'TLSv1.2',
    handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
  };
}

// reloadOnHUP: each SIGHUP reads the two files again and gives every TLS
// server of this process the new pair (setSecureContext): new handshakes use
// it, connections already made keep theirs. A pair that does not load keeps
// the one in use, and stderr says why.
function reloadOnHUP(opts, servers) {
  process.on('SIGHUP', () => {
    let pair;
    try {
      pair = readPair(opts.tlsCert, opts.tlsKey);
    } catch (err) {
      process.stderr.write(`yard-peer-node: SIGHUP: keeping the certificate in use: ${err.message}\n`);
      return;
    }
    opts.tls = { ...opts.tls, ...pair };
    for (const server of servers) server.setSecureContext(opts.tls);
    process.stderr.write('yard-peer-node: SIGHUP: reloaded the TLS certificate and key\n');
  });
}

module.exports = { loadTLS, reloadOnHUP };
