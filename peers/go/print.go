package main

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// The papayaChat study's Go server (`--app sink --print`): a goroutine per
// connection that prints whatever a read returns to standard output with the
// fmt package. os.Stdout is unbuffered, so every read costs one write(2) of
// the same bytes, and fmt converts and formats on the way. It is not how a Go
// programmer would write a sink (sink.go is); it is how the study's server
// did it, kept so that the study's comparison can be run as it was.

// printReadSize is the read buffer. The study does not say; 4 KiB is
// bufio's default size, and at 1 Mbit/s per connection a read rarely returns
// more than a few hundred bytes.
const printReadSize = 4 << 10

// printOut is where standard output goes once "listening" is printed (--out,
// default /dev/null); nil unless --print.
var printOut *os.File

// redirectStdout points descriptor 1 at f, as `> /dev/null` would have done
// for the study's server; the listening line has already gone to the real
// standard output.
func redirectStdout(f *os.File) {
	if err := syscall.Dup3(int(f.Fd()), 1, 0); err != nil {
		die(1, "redirecting standard output to %s: %v", f.Name(), err)
	}
}

func servePrint(c net.Conn) {
	buf := make([]byte, printReadSize)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			fmt.Print(string(buf[:n]))
		}
		if err != nil {
			return
		}
	}
}
