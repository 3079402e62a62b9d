package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Probes answers the health questions every kind of worker is asked.
type Probes interface {
	// Live is nil while the worker runs, and otherwise says why it stopped
	// or is stopping: a restart of the process is then in order.
	Live() error
	// Ready says whether the worker should be sent work now; degraded,
	// that it is ready but not all of it runs; reason, why either.
	Ready(ctx context.Context) (ready, degraded bool, reason string)
}

// Base is what the HTTP servers of the stream worker and the connect
// worker share: the listener and the goroutine serving it, liveness at
// /healthz, readiness at /readyz (both 503 when not), and the metrics at
// /metrics. A worker adds its own routes with Handle before Serve.
//
//causeway:owned
type Base struct {
	mux *http.ServeMux
	srv *http.Server
	ln  net.Listener
	log *zap.Logger
	// serving is set by Serve; done closes when its goroutine ends.
	serving bool
	done    chan struct{}
	// unmatched, when set, answers the requests no route takes.
	unmatched func(rw http.ResponseWriter, r *http.Request, code int)
}

// NewBase returns a server for addr answering the probes of p and
// serving the metrics of reg; it listens on Listen.
func NewBase(addr string, p Probes, reg *prometheus.Registry, log *zap.Logger) *Base {
	b := &Base{mux: http.NewServeMux(), log: log, done: make(chan struct{})}
	b.mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		if err := p.Live(); err != nil {
			http.Error(rw, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(rw, "ok")
	})
	b.mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, r *http.Request) {
		ready, degraded, reason := p.Ready(r.Context())
		switch {
		case !ready:
			http.Error(rw, "not ready: "+reason, http.StatusServiceUnavailable)
		case degraded:
			fmt.Fprintln(rw, "ready, degraded: "+reason)
		default:
			fmt.Fprintln(rw, "ready")
		}
	})
	b.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	b.srv = &http.Server{Addr: addr, Handler: http.HandlerFunc(b.serveHTTP), ReadHeaderTimeout: 5 * time.Second}
	return b
}

// OnUnmatched sets how the requests that no route takes are answered: f
// gets the code net/http's mux would answer, 404 for a path no route has
// or 405 for a method the path's routes do not take (the Allow header
// already set). Default: net/http's plain-text answers. Call it before
// Serve.
func (b *Base) OnUnmatched(f func(rw http.ResponseWriter, r *http.Request, code int)) {
	b.unmatched = f
}

// serveHTTP routes r, handing the requests no route takes to unmatched.
func (b *Base) serveHTTP(rw http.ResponseWriter, r *http.Request) {
	if b.unmatched != nil {
		if h, pattern := b.mux.Handler(r); pattern == "" {
			// The mux's own answer, kept for its code and headers only.
			probe := &headerOnly{header: rw.Header()}
			h.ServeHTTP(probe, r)
			b.unmatched(rw, r, probe.code)
			return
		}
	}
	b.mux.ServeHTTP(rw, r)
}

// headerOnly is a response writer that keeps the code and headers it is
// given (in the real response's header) and drops the body.
type headerOnly struct {
	header http.Header
	code   int
}

func (h *headerOnly) Header() http.Header         { return h.header }
func (h *headerOnly) Write(p []byte) (int, error) { return len(p), nil }
func (h *headerOnly) WriteHeader(code int)        { h.code = code }

// Handle adds a route, in net/http's pattern syntax.
func (b *Base) Handle(pattern string, h http.Handler) { b.mux.Handle(pattern, h) }

// HandleFunc adds a route served by a function.
func (b *Base) HandleFunc(pattern string, h http.HandlerFunc) { b.mux.HandleFunc(pattern, h) }

// Listen opens the listener, so that Addr is known before Serve.
func (b *Base) Listen() error {
	ln, err := net.Listen("tcp", b.srv.Addr)
	if err != nil {
		return fmt.Errorf("http listen %s: %w", b.srv.Addr, err)
	}
	b.ln = ln
	return nil
}

// Serve serves in a goroutine that Stop waits for.
func (b *Base) Serve() {
	b.serving = true
	go func() {
		defer close(b.done)
		if err := b.srv.Serve(b.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.log.Error("http server", zap.Error(err))
		}
	}()
}

// Addr is the address the server listens on, once it does.
func (b *Base) Addr() string {
	if b.ln == nil {
		return ""
	}
	return b.ln.Addr().String()
}

// Stop shuts the server down within ctx and waits for its goroutine; a
// listener that never served is closed.
func (b *Base) Stop(ctx context.Context) error {
	if b.ln == nil {
		return nil
	}
	if !b.serving {
		return b.ln.Close()
	}
	// Shutdown closes the listener first, so Serve returns at once; it
	// then waits within ctx for the requests being served.
	err := b.srv.Shutdown(ctx)
	<-b.done
	return err
}
