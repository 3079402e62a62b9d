package connectworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/causeway-stream/causeway/connect"
)

func (w *Worker) restartConnector(rw http.ResponseWriter, req *http.Request, c connectorView) {
	q := req.URL.Query()
	includeTasks, onlyFailed := q.Get("includeTasks") == "true", q.Get("onlyFailed") == "true"
	// The state keeps a restart request by its target, without the key's
	// "restart/": each request counts one more than the last.
	key := "restart/" + c.name
	b, _ := json.Marshal(restartRequest{Count: c.restarts[c.name].Count + 1, OnlyFailed: onlyFailed})
	if !includeTasks && !onlyFailed {
		// A connector has no instance apart from its tasks here: its
		// restart is theirs.
		w.writeOr500(rw, req, http.StatusNoContent, nil, kv{key, b})
		return
	}
	w.writeOr500(rw, req, http.StatusAccepted, func() any {
		st := c.status()
		for i := range st.Tasks {
			if !onlyFailed || st.Tasks[i].State.State == StateFailed {
				st.Tasks[i].State.State = StateRestarting
			}
		}
		return st
	}, kv{key, b})
}

// skipRecord sends the record a failed sink task stopped on to the
// dead-letter topic, and restarts the task past it: Causeway's own call,
// as its stream worker has (Kafka Connect has none).
func (w *Worker) skipRecord(rw http.ResponseWriter, req *http.Request, c connectorView) {
	id, err := strconv.Atoi(req.PathValue("task"))
	if err != nil || id < 0 || id >= len(c.tasks) {
		writeError(rw, http.StatusNotFound, fmt.Sprintf("Task %s of connector %s not found", req.PathValue("task"), c.name))
		return
	}
	st, ok := c.statuses[c.tasks[id]]
	switch {
	case !ok || st.Task != id || st.State != StateFailed || st.FailedAt == (recordRef{}):
		writeError(rw, http.StatusConflict, fmt.Sprintf("task %d of connector %s did not stop on a record: there is nothing to skip", id, c.name))
		return
	case c.config[keyDeadLetter] == "":
		writeError(rw, http.StatusConflict, fmt.Sprintf("connector %s has no %s to send the record to", c.name, keyDeadLetter))
		return
	}
	key := fmt.Sprintf("skip/%s/%d", c.name, id)
	var prev skipRequest
	w.store.view(func(s *clusterState) { prev = s.skips[fmt.Sprintf("%s/%d", c.name, id)] })
	b, _ := json.Marshal(skipRequest{Count: prev.Count + 1, recordRef: st.FailedAt})
	w.writeOr500(rw, req, http.StatusAccepted, func() any { return st.FailedAt }, kv{key, b})
}

func (w *Worker) validateConfig(rw http.ResponseWriter, req *http.Request) {
	class := req.PathValue("plugin")
	cfg, ok := decodeConfig(rw, req)
	if !ok {
		return
	}
	if c, ok := cfg[keyClass]; ok && c != class && !strings.HasSuffix(c, "."+class) {
		writeError(rw, http.StatusBadRequest, fmt.Sprintf("Included connector type %s does not match request type %s", c, class))
		return
	}
	cfg = maps.Clone(cfg)
	cfg[keyClass] = class
	v, err := w.validate(cfg)
	if errors.Is(err, errUnknownPlugin) {
		writeError(rw, http.StatusNotFound, err.Error())
		return
	}
	out := ConfigInfos{Name: class, ErrorCount: v.errorCount(), Groups: []string{}, Configs: []ConfigInfo{}}
	for _, vals := range [][]connect.Value{v.common.Values, v.own.Values} {
		for i, val := range vals {
			if !slices.Contains(out.Groups, val.Key.Group) {
				out.Groups = append(out.Groups, val.Key.Group)
			}
			value := &val.Value
			if !val.Given && val.Key.Default == "" {
				value = nil
			}
			if val.Key.Type == connect.TypePassword && value != nil {
				hidden := "[hidden]"
				value = &hidden
			}
			out.Configs = append(out.Configs, ConfigInfo{Definition: keyInfo(val.Key, i),
				Value: ConfigValueInfo{Name: val.Key.Name, Value: value, RecommendedValues: append([]string{}, val.Key.Allowed...),
					Errors: append([]string{}, val.Errors...), Visible: true}})
		}
	}
	for _, e := range v.extra {
		given := cfg[e.Field]
		group := "Common"
		if strings.HasPrefix(e.Field, keyTransforms) {
			group = "Transforms"
		}
		out.Configs = append(out.Configs, ConfigInfo{
			Definition: ConfigKeyInfo{Name: e.Field, Type: string(connect.TypeString), Importance: string(connect.Low), Group: group,
				Width: "NONE", DisplayName: e.Field, Dependents: []string{}},
			Value: ConfigValueInfo{Name: e.Field, Value: &given, RecommendedValues: []string{}, Errors: []string{e.Reason}, Visible: true}})
	}
	writeJSON(rw, http.StatusOK, out)
}

// patchConfig answers PATCH /connectors/{name}/config (KIP-477): the
// settings in the body replace the connector's, a null removes one, the
// others stay; the result is validated as a PUT's.
func (w *Worker) patchConfig(rw http.ResponseWriter, req *http.Request, c connectorView) {
	var patch map[string]*string
	if !decodeBody(rw, req, &patch, "a patch of a connector's configuration (an object of strings and nulls)") {
		return
	}
	cfg := maps.Clone(c.config)
	for k, v := range patch {
		if v == nil {
			delete(cfg, k)
		} else {
			cfg[k] = *v
		}
	}
	w.store1(rw, req, c.name, cfg, "", http.StatusOK)
}

// WorkerHealth is the body of GET /health, as Kafka Connect shapes it
// (KIP-1017).
type WorkerHealth struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// health answers GET /health: 200 once the worker has read the cluster's
// state and can answer requests; 503 while it cannot (the state topic
// unreadable within 10 s).
func (w *Worker) health(rw http.ResponseWriter, req *http.Request) {
	ctx, cancel := context.WithTimeout(req.Context(), 10*time.Second)
	defer cancel()
	if err := w.store.sync(ctx); err != nil {
		writeJSON(rw, http.StatusServiceUnavailable, WorkerHealth{Status: "unhealthy", Message: "the worker cannot read the cluster's state: " + err.Error()})
		return
	}
	writeJSON(rw, http.StatusOK, WorkerHealth{Status: "healthy", Message: "The worker has read the cluster's state and answers requests."})
}
