// Package server is a worker's HTTP server: its page, status, health,
// metrics, store queries (forwarded to the worker that holds the key) and
// the operator's task requests. It serves what package runtime hands it
// (Served) and owns only its listener and goroutine.
package server

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/internal/served"
)

// Server serves a worker's operations endpoints (listed on runtime.Server).
// The POST endpoints require the admin token as a bearer token when one is
// set.
//
//causeway:owned
type Server struct {
	// files are the worker's page.
	files fs.FS
	// client forwards queries to other workers.
	client *http.Client
	w      Served
	log    *zap.Logger
	base   *Base
}

// Served is what a Server serves: a stream thread, or an Instance of
// several, through package runtime.
type Served interface {
	Status() served.Status
	Done() <-chan struct{}
	// Err is the fatal error that stops the worker, once there is one.
	Err() error
	Query(ctx context.Context, q served.Query) (served.Answer, error)
	RestartTask(ctx context.Context, id string) error
	SkipRecord(ctx context.Context, id string) (causal.Entry, error)
	DeadLetterTopic() string
	// Advertise tells the other workers the server's address.
	Advertise(addr string)
	// Owner returns the HTTP address of the worker running task.
	Owner(task string) (string, bool)
	// Parts is what the server reads of what it serves.
	Parts() Parts
}

// Parts is what a server reads of what it serves.
type Parts struct {
	Topology   *framework.Topology
	AdminToken string
	// Registry holds the metrics /metrics serves.
	Registry *prometheus.Registry
	// InstanceID names the worker in the queries it forwards.
	InstanceID string
}

// New returns a server for w on addr; it listens on Start.
func New(addr string, w Served, log *zap.Logger) *Server {
	s := &Server{w: w, log: log, files: webFiles(), client: &http.Client{Timeout: 30 * time.Second}}
	s.base = NewBase(addr, probes{w}, w.Parts().Registry, log)
	s.base.HandleFunc("GET /status", s.statusJSON)
	s.base.HandleFunc("GET /topology", s.topologyJSON)
	s.base.HandleFunc("GET /stores/{store}/{kind}", s.query)
	s.base.HandleFunc("GET /{$}", s.page)
	s.base.Handle("GET /ui/", http.StripPrefix("/ui/", http.FileServerFS(s.files)))
	s.base.HandleFunc("POST /tasks/{processor}/{partition}/restart", s.admin(s.restart))
	s.base.HandleFunc("POST /tasks/{processor}/{partition}/skip", s.admin(s.skip))
	return s
}

// Start listens, tells the worker its address, and serves in a goroutine
// that Stop waits for.
func (s *Server) Start(context.Context) error {
	if err := s.base.Listen(); err != nil {
		return err
	}
	s.w.Advertise(s.base.Addr())
	s.log.Info("serving status and metrics", zap.String("addr", s.base.Addr()))
	s.base.Serve()
	return nil
}

// Addr is the address the server listens on, once started.
func (s *Server) Addr() string { return s.base.Addr() }

// Stop shuts the server down and waits for its goroutine.
func (s *Server) Stop(ctx context.Context) error { return s.base.Stop(ctx) }

// probes answers a stream worker's health: live until it stops or meets
// a fatal error; ready as its status says.
type probes struct{ w Served }

func (p probes) Live() error {
	select {
	case <-p.w.Done():
		return errors.New("worker stopped")
	default:
	}
	if err := p.w.Err(); err != nil {
		return fmt.Errorf("worker stopping on a fatal error: %w", err)
	}
	return nil
}

func (p probes) Ready(context.Context) (ready, degraded bool, reason string) {
	st := p.w.Status()
	return st.Ready, st.Degraded, st.Reason
}

func (s *Server) statusJSON(rw http.ResponseWriter, _ *http.Request) {
	rw.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(rw)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s.w.Status()); err != nil {
		s.log.Warn("write status", zap.Error(err))
	}
}

// webFiles are the files of the worker's page, embedded in the binary so
// that the page needs no network. mermaid.min.js is Mermaid 11 (MIT
// License, mermaid.LICENSE beside it), as published on the npm registry.
//
//go:embed web/index.html web/app.js web/style.css web/mermaid.min.js web/mermaid.LICENSE
var webEmbedded embed.FS

// webFiles returns the page's files at the root of a file system.
func webFiles() fs.FS {
	sub, err := fs.Sub(webEmbedded, "web")
	if err != nil { // "web" is a valid path: fs.Sub does not fail on it
		return webEmbedded
	}
	return sub
}

// page serves the worker's page.
func (s *Server) page(rw http.ResponseWriter, r *http.Request) {
	http.ServeFileFS(rw, r, s.files, "index.html")
}

// topologyView is what /topology reports.
type topologyView struct {
	Name        string `json:"name"`
	Mermaid     string `json:"mermaid"`
	Description string `json:"description"`
	// Stores lists the stores queries can read, with their kinds.
	Stores []storeView `json:"stores"`
}

type storeView struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
}

func (s *Server) topologyJSON(rw http.ResponseWriter, _ *http.Request) {
	rw.Header().Set("Content-Type", "application/json")
	t := s.w.Parts().Topology
	view := topologyView{Name: t.Name(), Mermaid: t.Mermaid(), Description: t.Describe(), Stores: []storeView{}}
	for _, p := range t.Processors() {
		for _, st := range p.Stores {
			view.Stores = append(view.Stores, storeView{Name: st.Name, Kind: st.Kind.String()})
		}
	}
	if err := json.NewEncoder(rw).Encode(view); err != nil {
		s.log.Warn("write topology", zap.Error(err))
	}
}

// forwardedHeader marks a query one worker forwarded to another, which
// answers it or refuses it, but never forwards it again.
const forwardedHeader = "X-Causeway-Forwarded"

// admin lets a request through to h only with the admin token, when one
// is set.
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	token := s.w.Parts().AdminToken
	if token == "" {
		return h
	}
	want := []byte("Bearer " + token)
	return func(rw http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			rw.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(rw, "this endpoint needs the admin token (Authorization: Bearer <token>)", http.StatusUnauthorized)
			return
		}
		h(rw, r)
	}
}

func (s *Server) restart(rw http.ResponseWriter, r *http.Request) {
	id := r.PathValue("processor") + "/" + r.PathValue("partition")
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	err := s.w.RestartTask(ctx, id)
	if err == nil {
		rw.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(rw, "task %s restarted from its committed state\n", id)
		return
	}
	s.taskError(rw, r, id, err, "restart")
}

func (s *Server) skip(rw http.ResponseWriter, r *http.Request) {
	id := r.PathValue("processor") + "/" + r.PathValue("partition")
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	rec, err := s.w.SkipRecord(ctx, id)
	if err == nil {
		rw.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(rw, "task %s restarted past %s@%d, which goes to %s\n", id, rec.Channel, rec.Offset, s.w.DeadLetterTopic())
		return
	}
	s.taskError(rw, r, id, err, "skip")
}

// taskError answers a failed restart or skip request r of task id: one
// for a task another worker runs is forwarded to it (the members topic
// says which).
func (s *Server) taskError(rw http.ResponseWriter, r *http.Request, id string, err error, what string) {
	switch {
	case errors.Is(err, taskmgr.ErrNoTask):
		if !s.forwardTo(rw, r, id) {
			http.Error(rw, err.Error(), http.StatusNotFound)
		}
	case errors.Is(err, taskmgr.ErrNotFailed):
		// Idempotent: asking again after it worked changes nothing.
		fmt.Fprintf(rw, "%v: nothing to %s\n", err, what)
	case errors.Is(err, taskmgr.ErrNoRecord):
		http.Error(rw, err.Error(), http.StatusConflict)
	default:
		http.Error(rw, err.Error(), http.StatusInternalServerError)
	}
}
