'use strict';
// The cluster primary: forks the workers, owns the counter, relays the
// sharded REST stores' messages between workers, prints the listening line
// once every worker listens, and shuts the workers down on SIGTERM.

const cluster = require('node:cluster');

const STOP_TIMEOUT_MS = 3000;

class Primary {
  constructor(opts) {
    this.opts = opts;
    this.workers = []; // index = shard number
    this.listening = 0;
    this.stopping = false;
    this.count = 0; // the counter app's value; workers fetch-and-add over IPC
  }

  start() {
    cluster.setupPrimary({ silent: false });
    for (let shard = 0; shard < this.opts.cluster; shard++) {
      const w = cluster.fork({ YARD_NODE_SHARD: String(shard) });
      this.workers.push(w);
      w.on('message', (msg) => this.onMessage(w, msg));
      w.on('exit', (code, signal) => this.onExit(shard, code, signal));
    }
    process.on('SIGTERM', () => this.stop(0));
    process.on('SIGINT', () => this.stop(0));
    // SIGHUP reloads the certificate in every worker (each serves with its own).
    if (this.opts.tls) {
      process.on('SIGHUP', () => {
        for (const w of this.workers) if (!w.isDead()) w.process.kill('SIGHUP');
      });
    }
  }

  // A worker's message once all its servers listen: their addresses, in order.
  onListening(where) {
    // Port 0 in a cluster: the primary binds once and shares the handle, so
    // every worker must report the same address.
    if (this.address !== undefined && this.address !== where) {
      process.stderr.write(`yard-peer-node: workers listen on ${this.address} and ${where}\n`);
      this.stop(1);
      return;
    }
    this.address = where;
    this.listening++;
    if (this.listening === this.workers.length) process.stdout.write(`listening ${where}\n`);
  }

  onMessage(w, msg) {
    switch (msg.t) {
      case 'ctr': {
        // A worker's pipelined batch: reserve its increments in one step.
        const base = this.count;
        this.count += msg.incs;
        w.send({ t: 'ctr', id: msg.id, base });
        break;
      }
      case 'listening':
        this.onListening(msg.where);
        break;
      case 'kv': // a store request for another worker's shard
      case 'kvr': // and its reply
        this.workers[msg.to].send(msg);
        break;
      default:
        process.stderr.write(`yard-peer-node: primary: unknown message ${JSON.stringify(msg)}\n`);
    }
  }

  onExit(shard, code, signal) {
    if (this.stopping) {
      if (this.workers.every((w) => w.isDead())) process.exit(this.exitCode);
      return;
    }
    // A benchmark must not hide a crash behind a silent respawn.
    process.stderr.write(`yard-peer-node: worker ${shard} died (code ${code}, signal ${signal})\n`);
    this.stop(1);
  }

  stop(code) {
    if (this.stopping) return;
    this.stopping = true;
    this.exitCode = code;
    for (const w of this.workers) {
      if (!w.isDead()) w.send({ t: 'stop' });
    }
    if (this.workers.every((w) => w.isDead())) process.exit(code);
    setTimeout(() => {
      process.stderr.write('yard-peer-node: workers did not stop in time; killing them\n');
      for (const w of this.workers) if (!w.isDead()) w.process.kill('SIGKILL');
      process.exit(1);
    }, STOP_TIMEOUT_MS).unref();
  }
}

module.exports = { Primary };
