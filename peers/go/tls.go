package main

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// handshakeTimeout bounds a TLS handshake, as yard-serve's default
// --tls-handshake-timeout does: a client that opens a connection and never
// finishes its handshake is closed instead of holding a goroutine forever.
const handshakeTimeout = 10 * time.Second

// addrList is a repeatable flag: every --tls-listen adds one address.
type addrList []string

func (a *addrList) String() string     { return strings.Join(*a, " ") }
func (a *addrList) Set(s string) error { *a = append(*a, s); return nil }

// loadCertificate reads the PEM chain and key. Each failure names the file
// it is about, as yard-serve's messages do.
func loadCertificate(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--tls-cert %s: %v", certFile, errReason(err))
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--tls-key %s: %v", keyFile, errReason(err))
	}
	if !hasPEMBlock(certPEM, func(t string) bool { return t == "CERTIFICATE" }) {
		return tls.Certificate{}, fmt.Errorf("--tls-cert %s: not a PEM certificate", certFile)
	}
	if !hasPEMBlock(keyPEM, func(t string) bool { return strings.HasSuffix(t, "PRIVATE KEY") }) {
		return tls.Certificate{}, fmt.Errorf("--tls-key %s: not a PEM private key", keyFile)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		if strings.Contains(err.Error(), "does not match") {
			return tls.Certificate{}, fmt.Errorf("--tls-key %s is not the key of --tls-cert %s: %v",
				keyFile, certFile, err)
		}
		// Blocks of the right type whose contents do not parse.
		return tls.Certificate{}, fmt.Errorf("--tls-cert %s, --tls-key %s: %v", certFile, keyFile, err)
	}
	return pair, nil
}

// errReason drops the "open FILE: " that *PathError repeats.
func errReason(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func hasPEMBlock(data []byte, want func(string) bool) bool {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return false
		}
		if want(b.Type) {
			return true
		}
	}
}

// certKeeper holds the certificate and key in use. Each handshake asks it
// (GetCertificate), so a SIGHUP that replaces the pair reaches the next
// handshakes; connections already made keep the pair they were made with.
type certKeeper struct {
	certFile, keyFile string
	pair              atomic.Pointer[tls.Certificate]
}

func newCertKeeper(certFile, keyFile string, pair tls.Certificate) *certKeeper {
	k := &certKeeper{certFile: certFile, keyFile: keyFile}
	k.pair.Store(&pair)
	return k
}

func (k *certKeeper) certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return k.pair.Load(), nil
}

// reloadOnHUP: each SIGHUP loads the two files again, as yard-serve does. A
// pair that does not load (or a key that is not the certificate's) keeps
// the one in use, and stderr says why.
func (k *certKeeper) reloadOnHUP() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			pair, err := loadCertificate(k.certFile, k.keyFile)
			if err != nil {
				fmt.Fprintf(os.Stderr, "yard-peer-go: SIGHUP: keeping the certificate in use: %v\n", err)
				continue
			}
			k.pair.Store(&pair)
			fmt.Fprintln(os.Stderr, "yard-peer-go: SIGHUP: reloaded the TLS certificate and key")
		}
	}()
}

// serverTLSConfig is TLS 1.2 and 1.3 only with crypto/tls's defaults (its
// cipher suites and curves, session tickets on, no renegotiation: a Go
// server never renegotiates), the certificate the keeper holds at each
// handshake. nextProtos is set for HTTP so that a client offering ALPN
// learns it speaks HTTP/1.1.
func serverTLSConfig(keeper *certKeeper, nextProtos []string) *tls.Config {
	return &tls.Config{
		GetCertificate: keeper.certificate,
		MinVersion:     tls.VersionTLS12,
		NextProtos:     nextProtos,
	}
}

// handshake finishes a TLS connection's handshake within handshakeTimeout
// before the app sees it; a plain connection passes through. The app then
// never blocks on a half-open handshake, and a failed one closes the
// connection without reaching the app.
func handshake(c net.Conn) bool {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return true
	}
	// A context rather than a deadline on the connection, so that the
	// deadline a SIGTERM sets for a sink's drain is never cleared here.
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	return tc.HandshakeContext(ctx) == nil
}
