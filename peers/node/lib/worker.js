'use strict';
// One event loop serving one app: the whole server in single-process mode, or
// one cluster worker. Shared state is local in the former and reached over
// IPC in the latter; the app code does not know which.

const net = require('node:net');
const { formatAddress } = require('./addr');
const { serveEcho, serveCounter, serveBroadcast, Sink } = require('./apps');
const { localCounter, ipcCounter, ShardedStores, ipc } = require('./shared');

// How long, after SIGTERM, a sink connection may keep delivering bytes that
// were in flight before it is flushed and closed.
const DRAIN_MS = 150;

function startWorker(opts, shard, shards) {
  const clustered = shards > 0;
  const channel = clustered ? ipc() : null;
  const sockets = new Set();
  let server;
  let onStop;

  if (opts.app === 'rest') {
    const { createApp } = require('./rest');
    const stores = new ShardedStores(shard, Math.max(shards, 1), channel);
    const app = createApp(opts, stores);
    server = app.listen(opts.listen.port, opts.listen.host);
    onStop = () => {
      server.close();
      server.closeAllConnections();
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
    server = net.createServer({ noDelay: true }, (socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      // A reset by the peer is that connection's business, not the server's.
      socket.on('error', () => socket.destroy());
      handle(socket);
    });
    server.listen(opts.listen.port, opts.listen.host);
    onStop = () => {
      server.close();
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

  server.on('error', (err) => {
    process.stderr.write(`yard-peer-node: listen ${opts.listen.host}:${opts.listen.port}: ${err.message}\n`);
    process.exit(1);
  });
  if (!clustered) {
    // In a cluster the primary prints the line once every worker listens.
    server.on('listening', () => process.stdout.write(`listening ${formatAddress(server.address())}\n`));
  }

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
