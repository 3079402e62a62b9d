package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/runtime/internal/served"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
	"go.uber.org/zap"
)

// query answers a store query (see runtime.StreamThread.Query), in JSON with keys and
// values in base64. A key held on another worker is 421 Misdirected
// Request and one that cannot be read now 503 with Retry-After: both may
// be asked again.
func (s *Server) query(rw http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	if s.refuseWhileStarting(rw) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	a, err := s.w.Query(ctx, q)
	switch {
	case err == nil:
		rw.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(rw).Encode(a); err != nil {
			s.log.Warn("write answer", zap.Error(err))
		}
	case errors.Is(err, served.ErrUnknownStore):
		http.Error(rw, err.Error(), http.StatusNotFound)
	case errors.Is(err, served.ErrWrongKind):
		http.Error(rw, err.Error(), http.StatusBadRequest)
	case errors.Is(err, served.ErrNotLocal):
		s.forward(rw, r, err)
	case errors.Is(err, served.ErrNotAvailable), errors.Is(err, served.ErrNotCaughtUp):
		rw.Header().Set("Retry-After", "1")
		http.Error(rw, err.Error(), http.StatusServiceUnavailable)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, transport.ErrStopped):
		rw.Header().Set("Retry-After", "1")
		http.Error(rw, err.Error(), http.StatusServiceUnavailable)
	default:
		http.Error(rw, err.Error(), http.StatusBadRequest)
	}
}

// parseQuery reads a query from r's path and form.
func parseQuery(r *http.Request) (served.Query, error) {
	q := served.Query{Store: r.PathValue("store"), Kind: served.QueryKind(r.PathValue("kind"))}
	var err error
	form := r.URL.Query()
	bytesOf := func(name string) []byte {
		if v := form.Get(name + "64"); v != "" {
			b, derr := base64.RawURLEncoding.DecodeString(strings.TrimRight(v, "="))
			if derr != nil {
				err = errors.Join(err, fmt.Errorf("%s64: %w", name, derr))
			}
			return b
		}
		if form.Has(name) {
			return []byte(form.Get(name))
		}
		return nil
	}
	timeOf := func(name string, def time.Time) time.Time {
		v := form.Get(name)
		if v == "" {
			return def
		}
		if ms, perr := strconv.ParseInt(v, 10, 64); perr == nil {
			return time.UnixMilli(ms).UTC()
		}
		t, perr := time.Parse(time.RFC3339Nano, v)
		if perr != nil {
			err = errors.Join(err, fmt.Errorf("%s: neither Unix milliseconds nor RFC 3339: %q", name, v))
		}
		return t
	}
	q.Key, q.From, q.To = bytesOf("key"), bytesOf("from"), bytesOf("to")
	if prefix := bytesOf("prefix"); prefix != nil {
		q.From, q.To = prefix, store.PrefixEnd(prefix)
	}
	// Windows starting in the last hour, unless the query says otherwise;
	// every version a versioned store keeps.
	q.Until = timeOf("until", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)) // JSON's last time
	q.Since = timeOf("since", time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond))
	if q.Kind == served.QueryVersions && form.Get("since") == "" {
		q.Since = time.Unix(0, 0).UTC()
	}
	if form.Has("as_of") {
		asOf := timeOf("as_of", time.Time{})
		q.AsOf = &asOf
	}
	if l := form.Get("limit"); l != "" {
		q.Limit, _ = strconv.Atoi(l)
	}
	if c := bytesOf("clock"); c != nil {
		clock, cerr := causal.DecodeClock(c)
		if cerr != nil {
			err = errors.Join(err, fmt.Errorf("clock: %w", cerr))
		}
		q.After = clock
	}
	if ms := form.Get("wait"); ms != "" {
		n, perr := strconv.Atoi(ms)
		if perr != nil {
			err = errors.Join(err, fmt.Errorf("wait: milliseconds: %q", ms))
		}
		q.Wait = time.Duration(n) * time.Millisecond
	}
	if err == nil && (q.Kind == served.QueryGet || q.Kind == served.QueryWindows || q.Kind == served.QueryVersions) && q.Key == nil {
		err = errors.New("the query needs a key (key or key64)")
	}
	return q, err
}

// refuseWhileStarting answers 503, saying what the worker does, while it
// starts: its stores are not open yet, and nothing would answer a query.
func (s *Server) refuseWhileStarting(rw http.ResponseWriter) bool {
	starting := s.w.Status().Starting
	if starting == "" {
		return false
	}
	rw.Header().Set("Retry-After", "1")
	http.Error(rw, "the worker is starting: "+starting, http.StatusServiceUnavailable)
	return true
}

// forward hands a query for a key this worker does not hold to the worker
// that says it runs the key's task, and its answer back; without one, or
// when the query was already forwarded, it answers 421.
func (s *Server) forward(rw http.ResponseWriter, r *http.Request, err error) {
	var nl *served.NotLocalError
	if errors.As(err, &nl) && s.forwardTo(rw, r, nl.Task) {
		return
	}
	http.Error(rw, err.Error(), http.StatusMisdirectedRequest)
}

// forwardTo hands r to the worker the members topic says runs task, with
// its admin token, and that worker's answer back. It reports false, having
// answered nothing, when no other worker runs task or r was forwarded to
// this one already (a request is forwarded once at most).
func (s *Server) forwardTo(rw http.ResponseWriter, r *http.Request, task string) bool {
	if r.Header.Get(forwardedHeader) != "" {
		return false
	}
	owner, ok := s.w.Owner(task)
	if !ok {
		return false
	}
	req, rerr := http.NewRequestWithContext(r.Context(), r.Method, "http://"+owner+r.URL.RequestURI(), nil)
	if rerr != nil {
		http.Error(rw, rerr.Error(), http.StatusInternalServerError)
		return true
	}
	req.Header.Set(forwardedHeader, s.w.Parts().InstanceID)
	if auth := r.Header.Get("Authorization"); auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, rerr := s.client.Do(req)
	if rerr != nil {
		rw.Header().Set("Retry-After", "1")
		http.Error(rw, fmt.Sprintf("forward to %s, which runs %s: %v", owner, task, rerr), http.StatusServiceUnavailable)
		return true
	}
	defer res.Body.Close()
	for _, h := range []string{"Content-Type", "Retry-After"} {
		if v := res.Header.Get(h); v != "" {
			rw.Header().Set(h, v)
		}
	}
	rw.Header().Set(forwardedHeader, owner)
	rw.WriteHeader(res.StatusCode)
	if _, err := io.Copy(rw, res.Body); err != nil {
		s.log.Debug("forward answer", zap.Error(err))
	}
	return true
}
