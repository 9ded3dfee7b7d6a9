package main

import (
	"bufio"
	"net"
	"sync"
)

const (
	// maxLine is the longest line a client may send, its '\n' included. A
	// client that sends a longer one is disconnected and nothing of that line
	// is forwarded.
	maxLine = 64 << 10
	// maxQueued bounds the bytes waiting to be written to one client. A client
	// that does not read is disconnected when one more line would exceed it.
	maxQueued = 1 << 20
)

// room is the broadcast app's set of clients. A sender holds the read lock
// while it hands a line to every other member, so senders run in parallel
// and a join or leave waits for the broadcasts under way.
type room struct {
	mu      sync.RWMutex
	members map[*member]struct{}
}

var chatRoom = room{members: make(map[*member]struct{})}

// member is one client. Its reader goroutine (serveBroadcast) broadcasts the
// lines the client sends; its writer goroutine writes the lines the others
// queued for it, everything queued at once (one writev).
type member struct {
	c      net.Conn
	mu     sync.Mutex
	queue  net.Buffers
	queued int           // bytes queued or being written
	wake   chan struct{} // capacity 1: there is something to write
	gone   bool          // wake is closed, the connection too
}

// serveBroadcast is one client of the broadcast chat: every line it sends
// goes, unchanged, to every other client, in the order it sent them. A
// partial line waits in the bufio.Reader for its '\n'; one that fills the
// reader's maxLine bytes (bufio.ErrBufferFull) ends the connection.
func serveBroadcast(c net.Conn) {
	m := &member{c: c, wake: make(chan struct{}, 1)}
	chatRoom.mu.Lock()
	chatRoom.members[m] = struct{}{}
	chatRoom.mu.Unlock()
	go m.writeLoop()
	defer func() {
		chatRoom.mu.Lock()
		delete(chatRoom.members, m)
		chatRoom.mu.Unlock()
		m.drop()
	}()
	r := bufio.NewReaderSize(c, maxLine)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return // the client left, sent a line over maxLine, or was dropped
		}
		// ReadSlice's line is the reader's buffer: copy it once, share it.
		chatRoom.broadcast(m, append([]byte(nil), line...))
	}
}

func (r *room) broadcast(from *member, line []byte) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for m := range r.members {
		if m != from {
			m.send(line)
		}
	}
}

// send queues a line for the writer, or drops a client that has maxQueued
// bytes it has not taken.
func (m *member) send(line []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		return
	}
	if m.queued+len(line) > maxQueued {
		m.dropLocked()
		return
	}
	m.queue = append(m.queue, line)
	m.queued += len(line)
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *member) writeLoop() {
	for range m.wake {
		m.mu.Lock()
		batch, n := m.queue, 0
		m.queue = nil
		m.mu.Unlock()
		for _, b := range batch {
			n += len(b)
		}
		if _, err := batch.WriteTo(m.c); err != nil {
			m.drop()
			return
		}
		m.mu.Lock()
		m.queued -= n
		m.mu.Unlock()
	}
}

// drop closes the connection (its reader then leaves the room) and ends the
// writer; safe to call more than once.
func (m *member) drop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropLocked()
}

func (m *member) dropLocked() {
	if !m.gone {
		m.gone = true
		close(m.wake)
		m.c.Close()
	}
}
