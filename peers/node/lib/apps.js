'use strict';
// The byte-stream apps. Each is a 'data' handler on a net.Socket.

const fs = require('node:fs');

const OP_READ = 0x00;
const OP_INCREMENT = 0x01;
const SINK_BUFFER = 64 * 1024;
// Broadcast: the longest line a client may send, its '\n' included (a longer
// one disconnects it), and the most bytes that may wait to be written to a
// client (one line more disconnects it: it is not reading).
const MAX_LINE = 64 * 1024;
const MAX_QUEUED = 1024 * 1024;

// Echo: the socket piped into itself, with back-pressure from pipe().
function serveEcho(socket) {
  socket.pipe(socket);
}

// Counter: a chunk is a batch of pipelined requests. The batch's increments
// are reserved in one fetch-and-add, so the replies are the consecutive
// values the batch owns. A byte other than 0x00/0x01 ends the batch and,
// after the replies before it, the connection.
function serveCounter(socket, counter) {
  let closed = false;
  socket.on('data', (chunk) => {
    if (closed) return;
    let end = 0;
    let incs = 0;
    while (end < chunk.length && chunk[end] <= OP_INCREMENT) {
      incs += chunk[end];
      end++;
    }
    const bad = end < chunk.length;
    if (bad) {
      closed = true;
      socket.pause();
    }
    counter.fetchAdd(incs, (base) => {
      const out = Buffer.allocUnsafe(end * 8);
      let v = base;
      for (let i = 0; i < end; i++) {
        if (chunk[i] === OP_INCREMENT) v++;
        out.writeUInt32BE(Math.floor(v / 0x100000000), i * 8);
        out.writeUInt32BE(v >>> 0, i * 8 + 4);
      }
      if (bad) {
        socket.end(out, () => socket.destroy());
      } else if (end > 0) {
        socket.write(out);
      }
    });
  });
}

// Broadcast chat: every line a client sends goes, unchanged, to every other
// socket in the room (a Set), in the order it was sent. A chunk's complete
// lines go out in one write per member; a partial line is held until its
// '\n' arrives.
function serveBroadcast(socket, room) {
  let held = []; // the chunks of a partial line
  let heldLen = 0;
  room.add(socket);
  socket.on('close', () => room.delete(socket));
  socket.on('data', (chunk) => {
    let end = 0; // chunk[0, end) ends the complete lines
    let lineLen = heldLen; // the current line's bytes before chunk[end]
    let tooLong = false;
    for (let nl = chunk.indexOf(0x0a); nl >= 0; nl = chunk.indexOf(0x0a, end)) {
      if (lineLen + nl + 1 - end > MAX_LINE) {
        tooLong = true;
        break;
      }
      end = nl + 1;
      lineLen = 0;
    }
    if (end > 0) {
      const lines = heldLen === 0 ? chunk.subarray(0, end)
        : Buffer.concat([...held, chunk.subarray(0, end)]);
      held = [];
      heldLen = 0;
      broadcast(room, socket, lines);
    }
    const rest = chunk.length - end;
    if (tooLong || heldLen + rest >= MAX_LINE) {
      socket.destroy();
    } else if (rest > 0) {
      held.push(chunk.subarray(end));
      heldLen += rest;
    }
  });
}

function broadcast(room, from, lines) {
  for (const s of room) {
    if (s === from || s.destroyed) continue;
    if (s.writableLength + lines.length > MAX_QUEUED) {
      s.destroy();
    } else {
      s.write(lines);
    }
  }
}

// Sink: every connection appends to one file opened O_APPEND, so each write
// lands whole. The writes are synchronous: to a regular file they complete in
// the page cache, and a synchronous write on the loop keeps one write(2) per
// chunk, in order, exactly like yard-serve's event-loop models. (fs.write
// would hop through the libuv thread pool and could reorder a connection's
// chunks.)
class Sink {
  constructor(path, buffered) {
    this.fd = fs.openSync(path, 'a');
    this.buffered = buffered;
    this.path = path;
    this.state = new Map(); // socket -> { buf, len }
  }

  serve(socket) {
    const st = { buf: this.buffered ? Buffer.allocUnsafe(SINK_BUFFER) : null, len: 0 };
    this.state.set(socket, st);
    socket.on('data', (chunk) => this.onData(socket, st, chunk));
    socket.on('end', () => this.finish(socket));
    socket.on('close', () => this.finish(socket));
  }

  onData(socket, st, chunk) {
    try {
      if (!this.buffered) {
        this.writeAll(chunk);
        return;
      }
      // A chunk never straddles two writes: flush first if it does not fit.
      if (st.len + chunk.length > SINK_BUFFER) this.flush(st);
      if (chunk.length >= SINK_BUFFER) {
        this.writeAll(chunk);
      } else {
        chunk.copy(st.buf, st.len);
        st.len += chunk.length;
      }
    } catch (err) {
      process.stderr.write(`yard-peer-node: sink: writing ${this.path}: ${err.message}\n`);
      socket.destroy();
    }
  }

  flush(st) {
    if (st.len > 0) {
      this.writeAll(st.buf.subarray(0, st.len));
      st.len = 0;
    }
  }

  writeAll(b) {
    let off = 0;
    while (off < b.length) off += fs.writeSync(this.fd, b, off, b.length - off);
  }

  // finish flushes and closes one connection; safe to call more than once.
  finish(socket) {
    const st = this.state.get(socket);
    if (st === undefined) return;
    this.state.delete(socket);
    try {
      this.flush(st);
    } catch (err) {
      process.stderr.write(`yard-peer-node: sink: writing ${this.path}: ${err.message}\n`);
    }
    socket.destroy();
  }
}

module.exports = { serveEcho, serveCounter, serveBroadcast, Sink };
