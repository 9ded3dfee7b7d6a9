// Command yard-peer-go is Switchyard's Go reference server: the echo, counter,
// sink, REST and broadcast chat apps written the way a Go programmer would write them, with a
// goroutine per connection and the standard library doing the work.
//
// It speaks exactly the protocols of yard-serve so the harness can drive both
// with the same load generator. See docs/peers.md.
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// drainWindow is how long, after SIGTERM, a sink connection may keep
// delivering bytes that were already in flight before it is flushed and
// closed. It bounds shutdown time while making "nothing lost" hold for data
// the client sent before the signal.
const drainWindow = 150 * time.Millisecond

type options struct {
	app        string
	listen     string
	tlsListen  addrList
	tlsCert    string
	tlsKey     string
	cluster    int
	out        string
	flush      string
	print      bool
	bcryptCost int
	longPollMS int
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: yard-peer-go --app echo|counter|sink|rest|broadcast --listen HOST:PORT [flags]

  --app NAME          echo, counter, sink, rest or broadcast (required)
  --listen HOST:PORT  address to listen on; port 0 picks a free port, IPv6 as [::1]:PORT
                      (required unless --tls-listen is given)
  --tls-listen HOST:PORT
                      also listen for TLS connections (1.2 and 1.3) here; may be given
                      several times; needs --tls-cert and --tls-key
  --tls-cert FILE     TLS: the server's certificate, then its chain (PEM)
  --tls-key FILE      TLS: the certificate's private key (PEM)
  --cluster N         use N CPUs: sets GOMAXPROCS=N (default: $GOMAXPROCS, else all CPUs)
  --out PATH          sink: file the received bytes are appended to (default /dev/null)
  --flush MODE        sink: each (one write per chunk received) or buffered (64 KiB per
                      connection, flushed when full and at close) (default each)
  --print             sink: the papayaChat study's Go server instead: each read's bytes
                      go to standard output through fmt.Print, unbuffered, one call per
                      read; after the "listening" line standard output is sent to --out
                      (default /dev/null). --flush does not apply
  --bcrypt-cost N     rest: bcrypt cost, 4..31 (default 10)
  --longpoll-ms MS    rest: delay before GET /longPoll answers (default 5000)

Prints "listening HOST:PORT" once it accepts connections (every address, a TLS one as
tls:HOST:PORT); exits 0 on SIGTERM or SIGINT.

       yard-peer-go fib N --workers W [--cutoff C] [--repeat K] [--json]
runs the Eve study's parallel Fibonacci instead (see fib --help).
`)
}

func die(code int, format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "yard-peer-go: "+format+"\n", args...)
	os.Exit(code)
}

func parseFlags() options {
	var o options
	fs := flag.NewFlagSet("yard-peer-go", flag.ContinueOnError)
	fs.Usage = usage
	fs.StringVar(&o.app, "app", "", "")
	fs.StringVar(&o.listen, "listen", "", "")
	fs.Var(&o.tlsListen, "tls-listen", "")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "")
	fs.StringVar(&o.tlsKey, "tls-key", "", "")
	fs.IntVar(&o.cluster, "cluster", 0, "")
	fs.StringVar(&o.out, "out", "/dev/null", "")
	fs.StringVar(&o.flush, "flush", "each", "")
	fs.BoolVar(&o.print, "print", false, "")
	fs.IntVar(&o.bcryptCost, "bcrypt-cost", 10, "")
	fs.IntVar(&o.longPollMS, "longpoll-ms", 5000, "")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2) // the flag package has already named the bad flag
	}
	if fs.NArg() > 0 {
		die(2, "unexpected argument %q (flags only; see --help)", fs.Arg(0))
	}
	switch o.app {
	case "echo", "counter", "sink", "rest", "broadcast":
	case "":
		die(2, "--app is required: echo, counter, sink, rest or broadcast")
	default:
		die(2, "--app %q: expected echo, counter, sink, rest or broadcast", o.app)
	}
	if len(o.tlsListen) == 0 && (o.tlsCert != "" || o.tlsKey != "") {
		die(2, "--tls-cert and --tls-key apply to TLS listeners: add --tls-listen HOST:PORT")
	}
	if len(o.tlsListen) > 0 && (o.tlsCert == "" || o.tlsKey == "") {
		die(2, "--tls-listen needs --tls-cert FILE and --tls-key FILE")
	}
	if o.listen == "" && len(o.tlsListen) == 0 {
		die(2, "--listen is required, as HOST:PORT (e.g. 127.0.0.1:0 or [::1]:0)")
	}
	if o.listen != "" {
		checkAddr("--listen", o.listen)
	}
	for _, a := range o.tlsListen {
		checkAddr("--tls-listen", a)
	}
	if o.flush != "each" && o.flush != "buffered" {
		die(2, "--flush %q: expected each or buffered", o.flush)
	}
	if o.print && o.app != "sink" {
		die(2, "--print belongs to --app sink, not %s", o.app)
	}
	if o.print && o.flush != "each" {
		die(2, "--print writes every read unbuffered: --flush %s does not apply", o.flush)
	}
	if o.cluster < 0 {
		die(2, "--cluster %d: expected a positive number of CPUs", o.cluster)
	}
	if o.bcryptCost < 4 || o.bcryptCost > 31 {
		die(2, "--bcrypt-cost %d: expected 4..31", o.bcryptCost)
	}
	if o.longPollMS < 0 {
		die(2, "--longpoll-ms %d: expected a non-negative number of milliseconds", o.longPollMS)
	}
	return o
}

func checkAddr(flag, addr string) {
	if _, port, err := net.SplitHostPort(addr); err != nil {
		die(2, "%s %q: expected HOST:PORT (IPv6 as [::1]:PORT)", flag, addr)
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		die(2, "%s %q: port must be a number 0..65535", flag, addr)
	}
}

// listeners opens --listen, then each --tls-listen wrapped in crypto/tls,
// and the "listening" line's words for them, in that order.
func listeners(o options, nextProtos []string) ([]net.Listener, string) {
	var lns []net.Listener
	var words []string
	if o.listen != "" {
		ln, err := listen(o.listen)
		if err != nil {
			die(1, "%v", err)
		}
		lns = append(lns, ln)
		words = append(words, ln.Addr().String())
	}
	if len(o.tlsListen) > 0 {
		pair, err := loadCertificate(o.tlsCert, o.tlsKey)
		if err != nil {
			die(1, "%v", err)
		}
		keeper := newCertKeeper(o.tlsCert, o.tlsKey, pair)
		keeper.reloadOnHUP() // before the listening line: a SIGHUP after it reloads
		config := serverTLSConfig(keeper, nextProtos)
		for _, a := range o.tlsListen {
			ln, err := listen(a)
			if err != nil {
				die(1, "%v", err)
			}
			lns = append(lns, tls.NewListener(ln, config))
			words = append(words, "tls:"+ln.Addr().String())
		}
	}
	return lns, strings.Join(words, " ")
}

// listen binds HOST:PORT. An IPv4 or IPv6 literal picks that family only, so
// "0.0.0.0:0" does not silently become a dual-stack [::] socket.
func listen(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: expected HOST:PORT (IPv6 as [::1]:PORT): %v", addr, err)
	}
	network := "tcp"
	if ip := net.ParseIP(host); ip != nil {
		if ip.To4() != nil {
			network = "tcp4"
		} else {
			network = "tcp6"
		}
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %v", addr, err)
	}
	return ln, nil
}

// connSet tracks live connections so that shutdown can reach them.
type connSet struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func (s *connSet) add(c net.Conn) {
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.wg.Add(1)
}

func (s *connSet) done(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// each applies f to every live connection.
func (s *connSet) each(f func(net.Conn)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		f(c)
	}
}

// waitTimeout waits for every handler to return, at most d.
func (s *connSet) waitTimeout(d time.Duration) bool {
	ch := make(chan struct{})
	go func() { s.wg.Wait(); close(ch) }()
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// acceptLoop gives each connection its own goroutine; a TLS connection's
// handshake runs there too, before the app sees it.
func acceptLoop(ln net.Listener, conns *connSet, handle func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors and the like: back off instead of spinning.
			fmt.Fprintf(os.Stderr, "yard-peer-go: accept: %v\n", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		conns.add(c)
		go func() {
			defer conns.done(c)
			defer c.Close()
			if handshake(c) {
				handle(c)
			}
		}()
	}
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "fib" {
		os.Exit(runFib(os.Args[2:])) // the Eve study's Fibonacci (fib.go), not a server
	}
	o := parseFlags()
	if o.cluster > 0 {
		runtime.GOMAXPROCS(o.cluster)
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	if o.app == "rest" {
		lns, where := listeners(o, []string{"http/1.1"})
		srv, err := newRESTServer(o)
		if err != nil {
			die(1, "%v", err)
		}
		fmt.Printf("listening %s\n", where)
		serveRESTUntilSignal(srv, lns, sigs)
		os.Exit(0)
	}
	lns, where := listeners(o, nil)
	var err error

	var handle func(net.Conn)
	var sink *sinkApp
	switch o.app {
	case "echo":
		handle = serveEcho
	case "counter":
		handle = serveCounter
	case "broadcast":
		handle = serveBroadcast
	case "sink":
		if o.print {
			// Opened now, so that a bad --out fails before "listening".
			out, err := os.OpenFile(o.out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
			if err != nil {
				die(1, "--out %s: %v", o.out, err)
			}
			printOut = out
			handle = servePrint
			break
		}
		sink, err = newSink(o.out, o.flush == "buffered")
		if err != nil {
			die(1, "%v", err)
		}
		handle = sink.serve
	}

	conns := &connSet{conns: make(map[net.Conn]struct{})}
	// The sockets listen already: a client that connects now waits in the
	// backlog. Accepting starts only once standard output points at --out,
	// so that --print cannot write a first read to the harness's pipe.
	fmt.Printf("listening %s\n", where)
	if printOut != nil {
		redirectStdout(printOut)
	}
	for _, ln := range lns {
		go acceptLoop(ln, conns, handle)
	}

	<-sigs
	for _, ln := range lns {
		ln.Close()
	}
	if sink != nil || printOut != nil {
		// Let bytes already in flight arrive, then every handler flushes.
		deadline := time.Now().Add(drainWindow)
		conns.each(func(c net.Conn) { c.SetReadDeadline(deadline) })
		if !conns.waitTimeout(2 * time.Second) {
			fmt.Fprintln(os.Stderr, "yard-peer-go: sink handlers did not finish in 2s")
		}
		if sink != nil {
			if err := sink.close(); err != nil {
				die(1, "closing %s: %v", o.out, err)
			}
		}
	}
	os.Exit(0)
}
