package connectworker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/transform"
)

// HTTPSourceClass is the built-in HTTP source's class: records posted to
// a worker that runs one of its tasks, at
// POST /connectors/{name}/topics/{topic}, go to the topic in one Kafka
// transaction per request.
//
// Causal sessions, for clients in any language: a request may carry the
// header Causeway-Session, the token the answer to the client's last
// request gave it. Every record of the request is stamped with the clock
// the token holds, and the answer's token adds the records just written.
// A client that sends each answer's token with its next request has its
// writes delivered in the order it made them, by every gate downstream.
const HTTPSourceClass = "HttpSource"

// SessionHeader is the HTTP header of a causal session's token.
const SessionHeader = "Causeway-Session"

const keyHTTPTopics = "http.topics"

func httpSourceConfig() *connect.ConfigDef {
	return &connect.ConfigDef{Keys: []connect.Key{
		{Name: keyHTTPTopics, Type: connect.TypeList, Required: true, Importance: connect.High, Group: "HTTP",
			Doc: "The topics records may be posted to."},
	}}
}

// httpSource is a task of the HTTP source. Requests take turns: one
// transaction at a time.
//
//causeway:owned
type httpSource struct {
	topics []string
	chain  *transform.Chain
	log    *zap.Logger
	// produced counts the records committed.
	produced *atomic.Int64
	// ready is closed once the producer's transactions are ready; err
	// then says whether they are.
	ready chan struct{}
	err   error

	// mu is held by the request writing: out writes to Kafka, and holds
	// the producer and the admin client.
	mu  sync.Mutex
	out sourceWriter
}

func (w *Worker) newHTTPSource(name string, task int, cfg map[string]string, own connect.Config, chain *transform.Chain, log *zap.Logger,
	produced *atomic.Int64) (*httpSource, error) {
	creation, _ := parseTopicCreation(cfg) // validate checked it
	producer, admin, err := w.producer(w.settings("connect-"+name, fmt.Sprintf("%s-%d", w.cfg.WorkerID, task)))
	if err != nil {
		return nil, err
	}
	h := &httpSource{topics: own.List(keyHTTPTopics), out: newSourceWriter(producer, admin, creation, w.topicUsed(name)), chain: chain, log: log,
		ready: make(chan struct{}), produced: produced}
	return h, nil
}

// run readies the producer, then waits for the end: requests do the work.
func (h *httpSource) run(ctx context.Context) error {
	h.err = h.out.producer.Init(ctx)
	if h.err == nil {
		h.err = h.out.readCounts(ctx)
	}
	close(h.ready)
	if h.err == nil {
		<-ctx.Done()
	}
	h.mu.Lock() // no request is writing
	defer h.mu.Unlock()
	h.out.admin.Close()
	return errors.Join(h.err, h.out.producer.Close())
}

// postedRecord is one record of a request, as Confluent's REST Proxy
// takes them: JSON key and value.
type postedRecord struct {
	Key   json.RawMessage `json:"key,omitempty"`
	Value json.RawMessage `json:"value"`
}

type postRequest struct {
	Records []postedRecord `json:"records"`
}

type postedOffset struct {
	Partition int32 `json:"partition"`
	// Offset is null: the answer knows the partition's end after the
	// transaction, not each record's offset.
	Offset *int64 `json:"offset"`
}

type postResponse struct {
	Offsets []postedOffset `json:"offsets"`
	// Session is the token to send with the next request.
	Session string `json:"session"`
}

// serve writes the records of one request to topic.
func (h *httpSource) serve(rw http.ResponseWriter, req *http.Request, topic string) {
	select {
	case <-h.ready:
	case <-req.Context().Done():
		return
	}
	if h.err != nil {
		writeError(rw, http.StatusServiceUnavailable, "the source's producer is not ready: "+h.err.Error())
		return
	}
	if !slices.Contains(h.topics, topic) {
		writeError(rw, http.StatusNotFound, fmt.Sprintf("topic %q is not one of this source's (%s)", topic, keyHTTPTopics))
		return
	}
	var body postRequest
	if err := json.NewDecoder(http.MaxBytesReader(rw, req.Body, 8<<20)).Decode(&body); err != nil {
		writeError(rw, http.StatusBadRequest, "the body is not {\"records\": [{\"key\": ..., \"value\": ...}]}: "+err.Error())
		return
	}
	var session causal.Session
	if tok := req.Header.Get(SessionHeader); tok != "" {
		clock, err := decodeToken(tok)
		if err != nil {
			writeError(rw, http.StatusBadRequest, fmt.Sprintf("header %s: %v", SessionHeader, err))
			return
		}
		session = causal.ResumeSession(clock)
	}
	offsets, clock, err := h.write(req.Context(), topic, body.Records, session)
	if err != nil {
		writeError(rw, http.StatusInternalServerError, err.Error())
		return
	}
	tok := base64.RawURLEncoding.EncodeToString(causal.AppendClock(nil, clock))
	rw.Header().Set(SessionHeader, tok)
	writeJSON(rw, http.StatusOK, postResponse{Offsets: offsets, Session: tok})
}

// decodeToken reads a session token; one that is not Causeway's is an
// error, as a corrupt clock header is.
func decodeToken(tok string) (causal.Clock, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return causal.Clock{}, fmt.Errorf("not a session token: %w", err)
	}
	return causal.DecodeClock(b)
}

// write writes recs in one transaction, stamped with session's clock,
// and returns the partitions written and the session's clock after them.
func (h *httpSource) write(ctx context.Context, topic string, recs []postedRecord, session causal.Session) ([]postedOffset, causal.Clock, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	if err := h.out.ensureTopic(ctx, topic); err != nil {
		return nil, causal.Clock{}, err
	}
	var out []postedOffset
	committed, err := h.out.write(ctx, &session, func(tx *sourceTxn) error {
		for i, r := range recs {
			var key []byte
			if len(r.Key) > 0 && string(r.Key) != "null" {
				key = r.Key
			}
			var value []byte
			if len(r.Value) > 0 && string(r.Value) != "null" {
				value = r.Value
			}
			now := time.Now()
			t, err := h.chain.Apply(transform.Record{Topic: topic, Key: key, Value: value, Timestamp: now})
			if errors.Is(err, connect.ErrFiltered) {
				out = append(out, postedOffset{Partition: -1}) // not written
				continue
			}
			if err != nil {
				return fmt.Errorf("record %d: %w", i, err)
			}
			p, err := tx.record(topic, t.Key, t.Value, now, t.Headers)
			if err != nil {
				return err
			}
			out = append(out, postedOffset{Partition: p})
		}
		return nil
	})
	if committed {
		h.produced.Add(int64(len(recs)))
	}
	if err != nil {
		return nil, causal.Clock{}, err
	}
	return out, session.Clock(), nil
}
