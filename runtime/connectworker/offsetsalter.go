package connectworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// OffsetsMessage is the body of a successful PATCH or DELETE of
// /connectors/{name}/offsets (KIP-875's Message).
type OffsetsMessage struct {
	Message string `json:"message"`
}

// alterOffsets answers PATCH (alter) and DELETE (reset) of
// /connectors/{name}/offsets, for a stopped connector: a sink's positions
// in its system, a source's offset in the offsets topic.
func (w *Worker) alterOffsets(rw http.ResponseWriter, req *http.Request, c connectorView) {
	if c.target != StateStopped {
		writeError(rw, http.StatusBadRequest, fmt.Sprintf("the connector %s is %s: stop it first (PUT /connectors/%[1]s/stop), so that no task writes while its offsets change", c.name, c.target))
		return
	}
	var body ConnectorOffsets
	if req.Method == http.MethodPatch && !decodeBody(rw, req, &body, "offsets ({\"offsets\": [{\"partition\", \"offset\"}]})") {
		return
	}
	v, err := w.validate(c.config)
	if err != nil {
		writeError(rw, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), 30*time.Second)
	defer cancel()
	switch {
	case v.plugin.sink != nil:
		err = w.alterSinkPositions(ctx, c, v, body.Offsets, req.Method == http.MethodDelete)
	case v.plugin.source != nil:
		err = w.alterSourceOffset(ctx, c.name, body.Offsets, req.Method == http.MethodDelete)
	default:
		err = errNoOffsets
	}
	var bad *badOffsets
	switch {
	case errors.As(err, &bad) || errors.Is(err, errNoOffsets):
		writeError(rw, http.StatusBadRequest, err.Error())
	case err != nil:
		writeError(rw, http.StatusInternalServerError, err.Error())
	case req.Method == http.MethodDelete:
		writeJSON(rw, http.StatusOK, OffsetsMessage{Message: "The connector's offsets were reset."})
	default:
		writeJSON(rw, http.StatusOK, OffsetsMessage{Message: "The connector's offsets were altered."})
	}
}

// errNoOffsets: the connector's plugin keeps no offsets to change.
var errNoOffsets = errors.New("this connector keeps no offsets that can be changed")

// badOffsets is a request body that does not say which offsets.
type badOffsets struct{ reason string }

func (e *badOffsets) Error() string { return "the offsets: " + e.reason }

// alterSinkPositions sets or resets a sink's positions through a task of
// its own.
func (w *Worker) alterSinkPositions(ctx context.Context, c connectorView, v validation, offsets []ConnectorOffset, reset bool) error {
	set := map[causal.Channel]int64{}
	for _, o := range offsets {
		topic, _ := o.Partition["kafka_topic"].(string)
		part, ok := o.Partition["kafka_partition"].(float64)
		if topic == "" || !ok {
			return &badOffsets{reason: fmt.Sprintf("a sink's partition is {\"kafka_topic\", \"kafka_partition\"}, not %v", o.Partition)}
		}
		ch := causal.Channel{Topic: topic, Partition: int32(part)}
		if o.Offset == nil {
			set[ch] = -1 // reset this one
			continue
		}
		m, _ := o.Offset.(map[string]any)
		next, ok := m["kafka_offset"].(float64)
		if !ok || next < 0 {
			return &badOffsets{reason: fmt.Sprintf("a sink's offset is {\"kafka_offset\": a whole number, at least 0} or null, not %v", o.Offset)}
		}
		set[ch] = int64(next)
	}
	own, err := v.plugin.def().Parse(c.config)
	if err != nil {
		return err
	}
	t, err := v.plugin.sink.Open(ctx, c.name, connect.SplitList(c.config[keyTopics]), own)
	if err != nil {
		return fmt.Errorf("open the sink to change its positions: %w", err)
	}
	defer t.Close()
	ed, ok := t.(connect.PositionsEditor)
	if !ok {
		return errNoOffsets
	}
	if reset {
		return ed.ResetPositions(ctx)
	}
	return ed.SetPositions(ctx, set)
}

// alterSourceOffset writes a source's new offset (nil: none, so that its
// next task starts from the beginning) to the offsets topic, keeping the
// topics it wrote so that its next task still claims what they hold.
func (w *Worker) alterSourceOffset(ctx context.Context, name string, offsets []ConnectorOffset, reset bool) error {
	var offset []byte
	if !reset {
		if len(offsets) != 1 || offsets[0].Partition["connector"] != name {
			return &badOffsets{reason: fmt.Sprintf("a source has one offset, of the partition {\"connector\": %q}", name)}
		}
		if offsets[0].Offset != nil {
			b, err := json.Marshal(offsets[0].Offset)
			if err != nil {
				return err
			}
			offset = b
		}
	}
	s, err := w.newSourceRunner(name, map[string]string{}, nil, w.log, nil)
	if err != nil {
		return err
	}
	defer func() {
		s.consumer.Close()
		s.close()
	}()
	// As a task starts: the offsets topic made when missing, the tasks
	// before fenced, and the topics they wrote read.
	if err := s.start(ctx); err != nil {
		return err
	}
	b, err := json.Marshal(committedOffset{Offset: offset, Topics: s.topics})
	if err != nil {
		return err
	}
	_, err = s.out.write(ctx, &causal.Session{}, func(tx *sourceTxn) error {
		return tx.raw(&transport.Message{Topic: s.offsets.Topic, Partition: s.offsets.Partition, Key: []byte(name), Value: b, Timestamp: time.Now()})
	})
	return err
}
