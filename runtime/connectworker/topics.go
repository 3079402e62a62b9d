package connectworker

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"go.uber.org/zap"
)

// ActiveTopics is the body of GET /connectors/{name}/topics (KIP-558):
// by the connector's name, the topics it has used.
type ActiveTopics map[string]struct {
	Topics []string `json:"topics"`
}

// activeTopics answers GET /connectors/{name}/topics: the topics the
// connector has read (a sink) or written (a source) since it was made or
// its topics were reset.
func (w *Worker) activeTopics(rw http.ResponseWriter, _ *http.Request, c connectorView) {
	var topics []string
	w.store.view(func(s *clusterState) {
		for t := range s.topics[c.name] {
			topics = append(topics, t)
		}
	})
	slices.Sort(topics)
	out := ActiveTopics{}
	e := out[c.name]
	e.Topics = append([]string{}, topics...)
	out[c.name] = e
	writeJSON(rw, http.StatusOK, out)
}

// topicTombstones are the writes that forget the connector's topics.
func (w *Worker) topicTombstones(connector string) []kv {
	var out []kv
	w.store.view(func(s *clusterState) {
		for t := range s.topics[connector] {
			out = append(out, kv{"topic/" + connector + "/" + t, nil})
		}
	})
	return out
}

// topicUsed is what the connector's tasks tell of each topic they use:
// a topic not recorded yet (since the connector was made, or its topics
// reset) is written to the state topic. A failure to record it is
// logged, and the task goes on.
func (w *Worker) topicUsed(connector string) func(topic string) {
	if w.store == nil {
		return nil // a worker without a cluster (tests of its parts)
	}
	return func(topic string) {
		known := false
		w.store.view(func(s *clusterState) { known = s.topics[connector][topic] })
		if known {
			return
		}
		var r topicRecord
		r.Topic.Name, r.Topic.Connector, r.Topic.Discover = topic, connector, time.Now().UnixMilli()
		b, err := json.Marshal(r)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = w.store.write(ctx, "topic/"+connector+"/"+topic, b)
		}
		if err != nil {
			w.log.Warn("an active topic not recorded", zap.String("connector", connector), zap.String("topic", topic), zap.Error(err))
		}
	}
}
