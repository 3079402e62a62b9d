package connectworker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
)

// ConnectorOffsets is the body of GET /connectors/{name}/offsets, as
// Kafka Connect shapes it (KIP-875): a sink's offsets are the positions
// its system holds, by topic and partition; a source's, its last
// committed offset.
type ConnectorOffsets struct {
	Offsets []ConnectorOffset `json:"offsets"`
}

// ConnectorOffset is one partition's offset: for a sink
// {"kafka_topic", "kafka_partition"} and {"kafka_offset"}; for a source
// {"connector"} and the source's own offset.
type ConnectorOffset struct {
	Partition map[string]any `json:"partition"`
	Offset    any            `json:"offset"`
}

// offsets answers GET /connectors/{name}/offsets.
func (w *Worker) offsets(rw http.ResponseWriter, req *http.Request, c connectorView) {
	ctx, cancel := context.WithTimeout(req.Context(), 30*time.Second)
	defer cancel()
	v, err := w.validate(c.config)
	if err != nil {
		writeError(rw, http.StatusBadRequest, err.Error())
		return
	}
	out := ConnectorOffsets{Offsets: []ConnectorOffset{}}
	switch {
	case v.plugin.sink != nil:
		positions, err := w.sinkPositions(ctx, c, v)
		if err != nil {
			writeError(rw, http.StatusInternalServerError, err.Error())
			return
		}
		chs := make([]causal.Channel, 0, len(positions))
		for ch := range positions {
			chs = append(chs, ch)
		}
		sort.Slice(chs, func(i, j int) bool {
			return chs[i].Topic < chs[j].Topic || chs[i].Topic == chs[j].Topic && chs[i].Partition < chs[j].Partition
		})
		for _, ch := range chs {
			out.Offsets = append(out.Offsets, ConnectorOffset{
				Partition: map[string]any{"kafka_topic": ch.Topic, "kafka_partition": ch.Partition},
				Offset:    map[string]any{"kafka_offset": positions[ch]}})
		}
	case v.plugin.source != nil:
		last, err := w.sourceOffset(ctx, c.name)
		if err != nil {
			writeError(rw, http.StatusInternalServerError, err.Error())
			return
		}
		if last.Offset != nil {
			var offset any = string(last.Offset)
			if json.Valid(last.Offset) {
				offset = json.RawMessage(last.Offset)
			}
			out.Offsets = append(out.Offsets, ConnectorOffset{Partition: map[string]any{"connector": c.name}, Offset: offset})
		}
	}
	writeJSON(rw, http.StatusOK, out)
}

// sinkPositions reads what the sink's system holds, through a task of
// its own.
func (w *Worker) sinkPositions(ctx context.Context, c connectorView, v validation) (map[causal.Channel]int64, error) {
	own, err := v.plugin.def().Parse(c.config)
	if err != nil {
		return nil, err
	}
	t, err := v.plugin.sink.Open(ctx, c.name, connect.SplitList(c.config[keyTopics]), own)
	if err != nil {
		return nil, fmt.Errorf("open the sink to read its positions: %w", err)
	}
	defer t.Close()
	return t.Positions(ctx)
}

// sourceOffset reads a source's last committed offset from the offsets
// topic.
func (w *Worker) sourceOffset(ctx context.Context, name string) (committedOffset, error) {
	s, err := w.newSourceRunner(name, map[string]string{}, nil, w.log, nil)
	if err != nil {
		return committedOffset{}, err
	}
	defer func() {
		s.consumer.Close()
		s.close()
	}()
	return s.lastCommitted(ctx)
}
