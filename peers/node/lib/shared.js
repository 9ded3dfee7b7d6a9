'use strict';
// Shared state, local or over the cluster's IPC channel: the counter (owned by
// the primary) and the REST stores (sharded across workers by fnv1a(key)).

const { EventEmitter } = require('node:events');

// ipc wraps process.send/on('message') with request ids.
function ipc() {
  const ch = new EventEmitter();
  const pending = new Map();
  let nextId = 1;
  ch.request = (msg, cb) => {
    const id = nextId++;
    pending.set(id, cb);
    process.send({ ...msg, id });
  };
  process.on('message', (msg) => {
    if (msg.t === 'stop') {
      ch.emit('stop');
    } else if (msg.t === 'ctr' || msg.t === 'kvr') {
      const cb = pending.get(msg.id);
      pending.delete(msg.id);
      cb(msg);
    } else if (msg.t === 'kv') {
      ch.emit('kv', msg);
    }
  });
  return ch;
}

function localCounter() {
  let count = 0;
  return {
    fetchAdd(incs, cb) {
      const base = count;
      count += incs;
      cb(base);
    },
  };
}

function ipcCounter(channel) {
  return {
    fetchAdd(incs, cb) {
      channel.request({ t: 'ctr', incs }, (msg) => cb(msg.base));
    },
  };
}

// fnv1a is the 32-bit FNV-1a hash of the key's UTF-8 bytes.
function fnv1a(key) {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(key, 'utf8')) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

// ShardedStores holds this worker's shard of the password and user stores
// and forwards other keys to their owner through the primary.
class ShardedStores {
  constructor(shard, shards, channel) {
    this.shard = shard;
    this.shards = shards;
    this.channel = channel;
    this.maps = { pw: new Map(), user: new Map() };
    if (channel) {
      channel.on('kv', (msg) => {
        const value = this.local(msg.store, msg.op, msg.key, msg.value);
        process.send({ t: 'kvr', to: msg.from, id: msg.id, value });
      });
    }
  }

  local(store, op, key, value) {
    const m = this.maps[store];
    if (op === 'set') {
      m.set(key, value);
      return null;
    }
    return m.has(key) ? m.get(key) : null;
  }

  // op returns a promise of the value (get) or null (set).
  op(store, op, key, value) {
    const owner = this.shards > 1 ? fnv1a(key) % this.shards : this.shard;
    if (owner === this.shard) return Promise.resolve(this.local(store, op, key, value));
    return new Promise((resolve) => {
      this.channel.request({ t: 'kv', to: owner, from: this.shard, store, op, key, value },
        (msg) => resolve(msg.value));
    });
  }

  getPassword(user) { return this.op('pw', 'get', user); }
  setPassword(user, hash) { return this.op('pw', 'set', user, hash); }
  getUser(user) { return this.op('user', 'get', user); }
  setUser(user, json) { return this.op('user', 'set', user, json); }
}

module.exports = { ipc, localCounter, ipcCounter, ShardedStores, fnv1a };
