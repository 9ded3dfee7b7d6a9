package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
)

// sinkBufferSize is the per-connection buffer of --flush buffered, the same
// 64 KiB as yard-serve's.
const sinkBufferSize = 64 << 10

type sinkApp struct {
	out      *os.File
	path     string
	buffered bool
}

// newSink opens PATH once for every connection. O_APPEND makes each write(2)
// land whole at the end of the file, so chunks of different connections
// interleave but never overlap.
func newSink(path string, buffered bool) (*sinkApp, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--out %s: %v", path, err)
	}
	return &sinkApp{out: f, path: path, buffered: buffered}, nil
}

func (s *sinkApp) close() error { return s.out.Close() }

// serve reads until EOF (or the shutdown read deadline) and writes what it
// read. In buffered mode a chunk never straddles two writes: the buffer is
// flushed first when the chunk would not fit, so a chunk stays contiguous in
// the file as it does with --flush each.
func (s *sinkApp) serve(c net.Conn) {
	buf := make([]byte, sinkBufferSize)
	var w *bufio.Writer
	if s.buffered {
		w = bufio.NewWriterSize(s.out, sinkBufferSize)
	}
	var werr error
	for werr == nil {
		n, rerr := c.Read(buf)
		if n > 0 {
			if w == nil {
				_, werr = s.out.Write(buf[:n])
			} else {
				if w.Available() < n {
					werr = w.Flush()
				}
				if werr == nil {
					_, werr = w.Write(buf[:n])
				}
			}
		}
		if rerr != nil {
			break
		}
	}
	if w != nil && werr == nil {
		werr = w.Flush()
	}
	if werr != nil {
		fmt.Fprintf(os.Stderr, "yard-peer-go: sink: writing %s: %v\n", s.path, werr)
	}
}
