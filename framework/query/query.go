// Package query reads a Causeway application's stores from Go, through the
// HTTP endpoints every worker serves (GET /stores/{store}/...), with the
// stores' serdes: what a worker's stores held at its last commit.
//
//	c := query.NewClient("http://worker-1:8080")
//	n, found, err := query.Get(ctx, c, "word-counts", "light", serde.String(), serde.Int64())
//
// A key whose task runs on another worker, or cannot be read now (it
// restores), is an *Error with Retryable set.
package query

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework/serde"
)

// Option adds to a query.
type Option func(url.Values)

// After makes a get or windows query wait, up to wait (0: the worker's
// default, 5 s), until the key's task has committed every record clock
// names on its inputs: with a client's causal.Session clock, the client
// reads its own writes. A worker that does not catch up in time answers
// 503, a retryable *Error.
func After(clock causal.Clock, wait time.Duration) Option {
	return func(v url.Values) {
		if clock.IsEmpty() {
			return
		}
		v.Set("clock64", b64(causal.EncodeClock(clock)))
		if wait > 0 {
			v.Set("wait", strconv.FormatInt(wait.Milliseconds(), 10))
		}
	}
}

// Client asks one worker.
type Client struct {
	base string
	http *http.Client
}

// NewClient returns a client of the worker whose HTTP server is at base
// ("http://host:port"), with a 30-second timeout per request.
func NewClient(base string) *Client {
	return &Client{base: strings.TrimRight(base, "/"), http: &http.Client{Timeout: 30 * time.Second}}
}

// Error is a query the worker refused.
type Error struct {
	Status  int
	Message string
	// Retryable: the task holding the key runs on another worker (421)
	// or cannot be read now (503); asking again, or another worker, may
	// succeed.
	Retryable bool
}

func (e *Error) Error() string { return fmt.Sprintf("query: %d: %s", e.Status, e.Message) }

// answer is what the worker answers, keys and values in base64.
type answer struct {
	Partitions []int32 `json:"partitions"`
	Complete   bool    `json:"complete"`
	Found      bool    `json:"found"`
	Value      []byte  `json:"value"`
	Entries    []struct {
		Key   []byte     `json:"key"`
		Value []byte     `json:"value"`
		Start *time.Time `json:"start"`
	} `json:"entries"`
	Truncated bool `json:"truncated"`
}

func (c *Client) ask(ctx context.Context, store, kind string, form url.Values) (answer, error) {
	var a answer
	u := c.base + "/stores/" + url.PathEscape(store) + "/" + kind + "?" + form.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return a, fmt.Errorf("query: %w", err)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return a, fmt.Errorf("query %s: %w", store, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return a, fmt.Errorf("query %s: %w", store, err)
	}
	if res.StatusCode != http.StatusOK {
		return a, &Error{Status: res.StatusCode, Message: strings.TrimSpace(string(body)),
			Retryable: res.StatusCode == http.StatusMisdirectedRequest || res.StatusCode == http.StatusServiceUnavailable}
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return a, fmt.Errorf("query %s: answer: %w", store, err)
	}
	return a, nil
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// Get reads key from a key-value store, as of the owning worker's last
// commit, and reports whether it is there.
func Get[K, V any](ctx context.Context, c *Client, store string, key K, keys serde.Serde[K], values serde.Serde[V], opts ...Option) (V, bool, error) {
	var v V
	kb, err := keys.Serialize(key)
	if err != nil {
		return v, false, fmt.Errorf("query: serialize key: %w", err)
	}
	form := url.Values{"key64": {b64(kb)}}
	for _, o := range opts {
		o(form)
	}
	a, err := c.ask(ctx, store, "get", form)
	if err != nil || !a.Found {
		return v, false, err
	}
	if v, err = values.Deserialize(a.Value); err != nil {
		return v, false, fmt.Errorf("query %s: value: %w", store, err)
	}
	return v, true, nil
}

// Entry is one key and value of a range.
type Entry[K, V any] struct {
	Key   K
	Value V
}

// Range reads the keys of a key-value store from from (nil: the first)
// up to to (nil: the last; excluded), of the partitions the worker holds,
// in key order, at most limit (0: the worker's default). complete says
// whether the worker holds every partition.
func Range[K, V any](ctx context.Context, c *Client, store string, from, to *K, limit int, keys serde.Serde[K], values serde.Serde[V]) (out []Entry[K, V], complete bool, err error) {
	form := url.Values{}
	for name, k := range map[string]*K{"from64": from, "to64": to} {
		if k == nil {
			continue
		}
		b, err := keys.Serialize(*k)
		if err != nil {
			return nil, false, fmt.Errorf("query: serialize %s: %w", strings.TrimSuffix(name, "64"), err)
		}
		form.Set(name, b64(b))
	}
	if limit > 0 {
		form.Set("limit", strconv.Itoa(limit))
	}
	a, err := c.ask(ctx, store, "range", form)
	if err != nil {
		return nil, false, err
	}
	for _, e := range a.Entries {
		k, err := keys.Deserialize(e.Key)
		if err != nil {
			return nil, false, fmt.Errorf("query %s: key: %w", store, err)
		}
		v, err := values.Deserialize(e.Value)
		if err != nil {
			return nil, false, fmt.Errorf("query %s: value of %v: %w", store, k, err)
		}
		out = append(out, Entry[K, V]{k, v})
	}
	return out, a.Complete, nil
}

// Window is one window of a key and its value.
type Window[V any] struct {
	Start time.Time
	Value V
}

// Windows reads key's windows that start from since to until (both
// included) from a window store.
func Windows[K, V any](ctx context.Context, c *Client, store string, key K, since, until time.Time, keys serde.Serde[K], values serde.Serde[V], opts ...Option) ([]Window[V], error) {
	kb, err := keys.Serialize(key)
	if err != nil {
		return nil, fmt.Errorf("query: serialize key: %w", err)
	}
	form := url.Values{"key64": {b64(kb)},
		"since": {strconv.FormatInt(since.UnixMilli(), 10)}, "until": {strconv.FormatInt(until.UnixMilli(), 10)}}
	for _, o := range opts {
		o(form)
	}
	a, err := c.ask(ctx, store, "windows", form)
	if err != nil {
		return nil, err
	}
	var out []Window[V]
	for _, e := range a.Entries {
		if e.Start == nil {
			return nil, errors.New("query: a window without its start")
		}
		v, err := values.Deserialize(e.Value)
		if err != nil {
			return nil, fmt.Errorf("query %s: value: %w", store, err)
		}
		out = append(out, Window[V]{Start: *e.Start, Value: v})
	}
	return out, nil
}
