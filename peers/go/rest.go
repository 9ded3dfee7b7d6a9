package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// maxBody bounds request bodies; the API's bodies are a few hundred bytes.
const maxBody = 1 << 20

// restServer holds the REST study's two stores. sync.Map fits them: keys are
// written once or rarely and read by many goroutines.
type restServer struct {
	passwords sync.Map // user -> bcrypt hash ([]byte)
	users     sync.Map // user -> JSON object ([]byte)
	cost      int
	longPoll  time.Duration
	// dummyHash is compared against when a user has no password, so that
	// verifying an unknown user costs the same as verifying a known one.
	dummyHash []byte
}

func newRESTServer(o options) (*http.Server, error) {
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("crypto/rand: %v", err)
	}
	dummy, err := bcrypt.GenerateFromPassword(secret, o.bcryptCost)
	if err != nil {
		return nil, fmt.Errorf("bcrypt: %v", err)
	}
	s := &restServer{
		cost:      o.bcryptCost,
		longPoll:  time.Duration(o.longPollMS) * time.Millisecond,
		dummyHash: dummy,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", s.root)
	mux.HandleFunc("/longPoll", s.longPollHandler)
	mux.HandleFunc("/password/set/", s.passwordSet)
	mux.HandleFunc("/password/verify/", s.passwordVerify)
	mux.HandleFunc("/user/set/", s.userSet)
	mux.HandleFunc("/user/get/", s.userGet)
	return &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}, nil
}

// serveRESTUntilSignal serves until SIGTERM/SIGINT, then shuts down: pending
// long polls get a short grace period and are then cut.
func serveRESTUntilSignal(srv *http.Server, lns []net.Listener, sigs <-chan os.Signal) {
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		go func(ln net.Listener) { errc <- srv.Serve(ln) }(ln)
	}
	select {
	case <-sigs:
	case err := <-errc:
		die(1, "http: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		srv.Close()
	}
}

func text(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, body)
}

// allow answers 405 unless the request uses method (GET also admits HEAD).
func allow(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method || (method == http.MethodGet && r.Method == http.MethodHead) {
		return true
	}
	w.Header().Set("Allow", method)
	text(w, http.StatusMethodNotAllowed, "Method not allowed.")
	return false
}

// userFrom returns the {user} segment after prefix; it must be one non-empty
// path segment, anything else is an unknown path.
func userFrom(w http.ResponseWriter, r *http.Request, prefix string) (string, bool) {
	user := strings.TrimPrefix(r.URL.Path, prefix)
	if user == "" || strings.Contains(user, "/") {
		text(w, http.StatusNotFound, "Not found.")
		return "", false
	}
	return user, true
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		text(w, http.StatusRequestEntityTooLarge, "Body too large.")
		return nil, false
	}
	return body, true
}

// passwordBody decodes {"password": "..."}; anything else is a 400.
func passwordBody(w http.ResponseWriter, r *http.Request) (string, bool) {
	body, ok := readBody(w, r)
	if !ok {
		return "", false
	}
	var req struct {
		Password *string `json:"password"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		text(w, http.StatusBadRequest, "Bad JSON.")
		return "", false
	}
	if req.Password == nil {
		text(w, http.StatusBadRequest, "Missing password.")
		return "", false
	}
	return *req.Password, true
}

func (s *restServer) root(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		text(w, http.StatusNotFound, "Not found.")
		return
	}
	if allow(w, r, http.MethodGet) {
		text(w, http.StatusOK, "OK")
	}
}

func (s *restServer) longPollHandler(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	t := time.NewTimer(s.longPoll)
	defer t.Stop()
	select {
	case <-t.C:
		text(w, http.StatusOK, "OK")
	case <-r.Context().Done(): // the client left or the server is shutting down
	}
}

func (s *restServer) passwordSet(w http.ResponseWriter, r *http.Request) {
	user, ok := userFrom(w, r, "/password/set/")
	if !ok || !allow(w, r, http.MethodPost) {
		return
	}
	password, ok := passwordBody(w, r)
	if !ok {
		return
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), s.cost)
	if err != nil {
		// bcrypt refuses passwords over 72 bytes rather than truncating them.
		text(w, http.StatusBadRequest, "Bad password: "+err.Error())
		return
	}
	s.passwords.Store(user, hash)
	text(w, http.StatusOK, "OK")
}

func (s *restServer) passwordVerify(w http.ResponseWriter, r *http.Request) {
	user, ok := userFrom(w, r, "/password/verify/")
	if !ok || !allow(w, r, http.MethodPost) {
		return
	}
	password, ok := passwordBody(w, r)
	if !ok {
		return
	}
	stored, found := s.passwords.Load(user)
	hash := s.dummyHash
	if found {
		hash = stored.([]byte)
	}
	err := bcrypt.CompareHashAndPassword(hash, []byte(password))
	switch {
	case !found:
		text(w, http.StatusBadRequest, "Password not found")
	case err == nil:
		text(w, http.StatusOK, "OK")
	case errors.Is(err, bcrypt.ErrMismatchedHashAndPassword):
		text(w, http.StatusForbidden, "Forbidden")
	default:
		text(w, http.StatusInternalServerError, "bcrypt: "+err.Error())
	}
}

func (s *restServer) userSet(w http.ResponseWriter, r *http.Request) {
	user, ok := userFrom(w, r, "/user/set/")
	if !ok || !allow(w, r, http.MethodPost) {
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	trimmed := bytes.TrimSpace(body)
	if !json.Valid(trimmed) || len(trimmed) == 0 || trimmed[0] != '{' {
		text(w, http.StatusBadRequest, "Bad JSON: expected an object.")
		return
	}
	s.users.Store(user, trimmed)
	text(w, http.StatusOK, "OK")
}

func (s *restServer) userGet(w http.ResponseWriter, r *http.Request) {
	user, ok := userFrom(w, r, "/user/get/")
	if !ok || !allow(w, r, http.MethodGet) {
		return
	}
	v, found := s.users.Load(user)
	if !found {
		text(w, http.StatusBadRequest, "User not found.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(v.([]byte))
}
