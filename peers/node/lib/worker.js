'use strict';
// One event loop serving one app: the whole server in single-process mode, or
// one cluster worker. Shared state is local in the former and reached over
// IPC in the latter; the app code does not know which.

const http = require('node:http');
const https = require('node:https');
const net = require('node:net');
const tls = require('node:tls');
const { formatAddress } = require('./addr');
const { serveEcho, serveCounter, serveBroadcast, Sink } = require('./apps');
const { localCounter, ipcCounter, ShardedStores, ipc } = require('./shared');
const { reloadOnHUP } = require('./tls');

// How long, after SIGTERM, a sink connection may keep delivering bytes that
// were in flight before it is flushed and closed.
const DRAIN_MS = 150;

function startWorker(opts, shard, shards) {
  const clustered = shards > 0;
  const channel = clustered ? ipc() : null;
  const sockets = new Set();
  let servers;
  let onStop;

  if (opts.app === 'rest') {
    const { createApp } = require('./rest');
    const stores = new ShardedStores(shard, Math.max(shards, 1), channel);
    const app = createApp(opts, stores);
    // The Express app is the request handler of an http server for --listen
    // and of an https one for each --tls-listen.
    servers = opts.listens.map((l) => (l.tls
      ? https.createServer({ ...opts.tls, ALPNProtocols: ['http/1.1'] }, app)
      : http.createServer(app)));
    onStop = () => {
      for (const server of servers) {
        server.close();
        server.closeAllConnections();
      }
      process.exit(0);
    };
  } else {
    let handle;
    let sink = null;
    if (opts.app === 'echo') {
      handle = serveEcho;
    } else if (opts.app === 'counter') {
      const counter = clustered ? ipcCounter(channel) : localCounter();
      handle = (s) => serveCounter(s, counter);
    } else if (opts.app === 'broadcast') {
      const room = new Set();
      handle = (s) => serveBroadcast(s, room);
    } else {
      sink = new Sink(opts.out, opts.buffered);
      handle = (s) => sink.serve(s);
    }
    const onConnection = (socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      // A reset by the peer is that connection's business, not the server's.
      socket.on('error', () => socket.destroy());
      handle(socket);
    };
    // A TLS server hands the app its TLSSocket once the handshake is done
    // ('secureConnection'); the app reads and writes plaintext as on a socket.
    servers = opts.listens.map((l) => (l.tls
      ? tls.createServer({ ...opts.tls, noDelay: true }, onConnection)
      : net.createServer({ noDelay: true }, onConnection)));
    onStop = () => {
      for (const server of servers) server.close();
      if (sink === null) {
        process.exit(0);
      }
      // Let bytes already sent arrive, then flush every connection's buffer.
      setTimeout(() => {
        for (const s of sockets) sink.finish(s);
        process.exit(0);
      }, DRAIN_MS);
    };
  }

  if (opts.tls) reloadOnHUP(opts, servers.filter((s, i) => opts.listens[i].tls));

  // Listened on in the same order in every worker: a cluster worker's n-th
  // listen on a HOST:PORT shares the primary's n-th handle for it.
  let pending = servers.length;
  servers.forEach((server, i) => {
    const l = opts.listens[i];
    // A handshake that fails or outlasts handshakeTimeout: Node reports it
    // here and leaves the socket open; close it.
    if (l.tls) server.on('tlsClientError', (err, socket) => socket.destroy());
    server.on('error', (err) => {
      process.stderr.write(`yard-peer-node: listen ${l.host}:${l.port}: ${err.message}\n`);
      process.exit(1);
    });
    server.once('listening', () => {
      if (--pending > 0) return;
      const where = servers.map((s, j) => (opts.listens[j].tls ? 'tls:' : '')
        + formatAddress(s.address())).join(' ');
      // In a cluster the primary prints the line once every worker listens.
      if (clustered) process.send({ t: 'listening', where });
      else process.stdout.write(`listening ${where}\n`);
    });
    server.listen(l.port, l.host);
  });

  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    onStop();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  if (clustered) {
    channel.on('stop', stop);
    // The primary is gone: nothing would ever stop us, so stop now.
    process.on('disconnect', stop);
  }
}

module.exports = { startWorker };
