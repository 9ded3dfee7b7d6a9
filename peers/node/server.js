'use strict';
// Switchyard's Node.js reference server. One process runs one event loop;
// --cluster N runs N worker processes behind Node's cluster module, with the
// shared state (the counter, the REST stores) reached over IPC, as in the
// REST study. The broadcast chat's room is one process's Set of sockets, so
// it runs without --cluster. See docs/peers.md.

const cluster = require('node:cluster');
const fs = require('node:fs');
const { parseArgs } = require('node:util');
const { Primary } = require('./lib/primary');
const { startWorker } = require('./lib/worker');
const { loadTLS } = require('./lib/tls');

const USAGE = `usage: peers/node/run --app echo|counter|sink|rest|broadcast --listen HOST:PORT [flags]

  --app NAME          echo, counter, sink, rest or broadcast (required)
  --listen HOST:PORT  address to listen on; port 0 picks a free port, IPv6 as [::1]:PORT
                      (required unless --tls-listen is given)
  --tls-listen HOST:PORT
                      also listen for TLS connections (1.2 and 1.3) here; may be given
                      several times; needs --tls-cert and --tls-key
  --tls-cert FILE     TLS: the server's certificate, then its chain (PEM)
  --tls-key FILE      TLS: the certificate's private key (PEM)
  --cluster N         run N worker processes (node:cluster); without it, one process
                      (not with broadcast: its room is one process's sockets)
  --out PATH          sink: file the received bytes are appended to (default /dev/null)
  --flush MODE        sink: each (one write per chunk received) or buffered (64 KiB per
                      connection, flushed when full and at close) (default each)
  --bcrypt-cost N     rest: bcrypt cost, 4..31 (default 10)
  --longpoll-ms MS    rest: delay before GET /longPoll answers (default 5000)
  --help              this text

Prints "listening HOST:PORT" once it accepts connections (every address, a TLS one as
tls:HOST:PORT); exits 0 on SIGTERM or SIGINT.
`;

function usageError(msg) {
  process.stderr.write(`yard-peer-node: ${msg}\n`);
  process.exit(2);
}

function intFlag(name, value, min, max) {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
    usageError(`--${name} ${JSON.stringify(value)}: expected an integer ${min}..${max}`);
  }
  return Number(value);
}

// parseListen splits HOST:PORT; an IPv6 host is written in brackets.
function parseListen(s, flag = '--listen', tls = false) {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(s) || /^([^:[\]]+):(\d+)$/.exec(s);
  if (!m || Number(m[2]) > 65535) {
    usageError(`${flag} ${JSON.stringify(s)}: expected HOST:PORT (IPv6 as [::1]:PORT)`);
  }
  return { host: m[1], port: Number(m[2]), tls };
}

function parseOptions(argv) {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        app: { type: 'string' },
        listen: { type: 'string' },
        'tls-listen': { type: 'string', multiple: true, default: [] },
        'tls-cert': { type: 'string' },
        'tls-key': { type: 'string' },
        cluster: { type: 'string' },
        out: { type: 'string', default: '/dev/null' },
        flush: { type: 'string', default: 'each' },
        'bcrypt-cost': { type: 'string', default: '10' },
        'longpoll-ms': { type: 'string', default: '5000' },
        help: { type: 'boolean' },
      },
    }));
  } catch (err) {
    usageError(`${err.message} (see --help)`);
  }
  if (values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  if (!values.app) usageError('--app is required: echo, counter, sink, rest or broadcast');
  if (!['echo', 'counter', 'sink', 'rest', 'broadcast'].includes(values.app)) {
    usageError(`--app ${JSON.stringify(values.app)}: expected echo, counter, sink, rest or broadcast`);
  }
  if (values.app === 'broadcast' && values.cluster !== undefined) {
    usageError('--cluster: not with --app broadcast (its room is one process\'s Set of sockets)');
  }
  const tlsListen = values['tls-listen'];
  if (tlsListen.length === 0 && (values['tls-cert'] || values['tls-key'])) {
    usageError('--tls-cert and --tls-key apply to TLS listeners: add --tls-listen HOST:PORT');
  }
  if (tlsListen.length > 0 && !(values['tls-cert'] && values['tls-key'])) {
    usageError('--tls-listen needs --tls-cert FILE and --tls-key FILE');
  }
  if (!values.listen && tlsListen.length === 0) {
    usageError('--listen is required, as HOST:PORT (e.g. 127.0.0.1:0)');
  }
  if (!['each', 'buffered'].includes(values.flush)) {
    usageError(`--flush ${JSON.stringify(values.flush)}: expected each or buffered`);
  }
  return {
    app: values.app,
    // Plain first, then TLS: the order of the listening line.
    listens: [
      ...(values.listen ? [parseListen(values.listen)] : []),
      ...tlsListen.map((s) => parseListen(s, '--tls-listen', true)),
    ],
    tlsCert: values['tls-cert'],
    tlsKey: values['tls-key'],
    cluster: intFlag('cluster', values.cluster, 1, 1024),
    out: values.out,
    buffered: values.flush === 'buffered',
    bcryptCost: intFlag('bcrypt-cost', values['bcrypt-cost'], 4, 31),
    longPollMs: intFlag('longpoll-ms', values['longpoll-ms'], 0, 2 ** 31 - 1),
  };
}

function main() {
  const opts = parseOptions(process.argv.slice(2));
  // Loaded in every process (a worker serves with it), checked before any
  // listens, so a bad file is exit 1 before the listening line.
  opts.tls = opts.tlsCert ? loadTLS(opts.tlsCert, opts.tlsKey) : null;
  if (cluster.isWorker) {
    startWorker(opts, Number(process.env.YARD_NODE_SHARD), opts.cluster);
    return;
  }
  if (opts.app === 'sink') {
    // Truncate once, here, before any worker opens the file for appending.
    try {
      fs.closeSync(fs.openSync(opts.out, 'w'));
    } catch (err) {
      process.stderr.write(`yard-peer-node: --out ${opts.out}: ${err.message}\n`);
      process.exit(1);
    }
  }
  if (opts.cluster === undefined) {
    startWorker(opts, 0, 0);
  } else {
    new Primary(opts).start();
  }
}

main();
