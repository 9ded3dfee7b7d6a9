package main

import (
	"encoding/binary"
	"net"
	"sync/atomic"
)

// count is the one shared counter. Every connection's goroutine updates it
// with a single atomic instruction; there is no lock and no owner.
var count atomic.Uint64

const (
	opRead      = 0x00
	opIncrement = 0x01
)

// serveCounter answers each request byte with the counter's value as 8 bytes
// big-endian. A pipelined batch read in one call is answered with one write.
// Any other byte closes this connection after the replies before it are sent.
func serveCounter(c net.Conn) {
	in := make([]byte, 4096)
	out := make([]byte, 0, 8*len(in))
	for {
		n, rerr := c.Read(in)
		out = out[:0]
		bad := false
		for _, op := range in[:n] {
			var v uint64
			switch op {
			case opRead:
				v = count.Load()
			case opIncrement:
				v = count.Add(1)
			default:
				bad = true
			}
			if bad {
				break
			}
			out = binary.BigEndian.AppendUint64(out, v)
		}
		if len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return
			}
		}
		if bad || rerr != nil {
			return
		}
	}
}
