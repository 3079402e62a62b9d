package connectworker

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/causeway-stream/causeway/connect"
)

// The REST API's bodies, shaped as Kafka Connect's REST entities (package
// org.apache.kafka.connect.runtime.rest.entities) shape them; the tests
// check every field name against them.

// ErrorMessage is the body of every error answer.
type ErrorMessage struct {
	ErrorCode int    `json:"error_code"`
	Message   string `json:"message"`
}

// TaskID names a task of a connector.
type TaskID struct {
	Connector string `json:"connector"`
	Task      int    `json:"task"`
}

// ConnectorInfo is a connector's configuration and tasks.
type ConnectorInfo struct {
	Name   string            `json:"name"`
	Config map[string]string `json:"config"`
	Tasks  []TaskID          `json:"tasks"`
	Type   string            `json:"type"`
}

// CreateConnectorRequest is the body of POST /connectors.
type CreateConnectorRequest struct {
	Name         string            `json:"name"`
	Config       map[string]string `json:"config"`
	InitialState string            `json:"initial_state,omitempty"`
}

// State is the state of a connector or of one of its tasks.
type State struct {
	State    string `json:"state"`
	WorkerID string `json:"worker_id"`
	Trace    string `json:"trace,omitempty"`
}

// TaskState is a task's State with its id.
type TaskState struct {
	ID int `json:"id"`
	State
}

// ConnectorStateInfo is the body of GET /connectors/{name}/status.
type ConnectorStateInfo struct {
	Name      string      `json:"name"`
	Connector State       `json:"connector"`
	Tasks     []TaskState `json:"tasks"`
	Type      string      `json:"type"`
}

// TaskInfo is a task and its configuration.
type TaskInfo struct {
	ID     TaskID            `json:"id"`
	Config map[string]string `json:"config"`
}

// PluginInfo is a connector plugin.
type PluginInfo struct {
	Class   string `json:"class"`
	Type    string `json:"type"`
	Version string `json:"version"`
}

// ConfigKeyInfo is the definition of a setting.
type ConfigKeyInfo struct {
	Name          string   `json:"name"`
	Type          string   `json:"type"`
	Required      bool     `json:"required"`
	DefaultValue  *string  `json:"default_value"`
	Importance    string   `json:"importance"`
	Documentation string   `json:"documentation"`
	Group         string   `json:"group"`
	OrderInGroup  int      `json:"order"`
	Width         string   `json:"width"`
	DisplayName   string   `json:"display_name"`
	Dependents    []string `json:"dependents"`
}

// ConfigValueInfo is a setting's value as validation found it.
type ConfigValueInfo struct {
	Name              string   `json:"name"`
	Value             *string  `json:"value"`
	RecommendedValues []string `json:"recommended_values"`
	Errors            []string `json:"errors"`
	Visible           bool     `json:"visible"`
}

// ConfigInfo is one setting's definition and value.
type ConfigInfo struct {
	Definition ConfigKeyInfo   `json:"definition"`
	Value      ConfigValueInfo `json:"value"`
}

// ConfigInfos is the body of a validation.
type ConfigInfos struct {
	Name       string       `json:"name"`
	ErrorCount int          `json:"error_count"`
	Groups     []string     `json:"groups"`
	Configs    []ConfigInfo `json:"configs"`
}

// ServerInfo is the body of GET /.
type ServerInfo struct {
	Version        string `json:"version"`
	Commit         string `json:"commit"`
	KafkaClusterID string `json:"kafka_cluster_id"`
}

// webFiles are the worker's page, at /ui/.
//
//go:embed web
var webFiles embed.FS

// routes adds the REST API and the page to the worker's server, which
// answers /healthz, /readyz and /metrics itself (probes).
func (w *Worker) routes() {
	mux := w.server
	mux.HandleFunc("GET /{$}", func(rw http.ResponseWriter, _ *http.Request) {
		writeJSON(rw, http.StatusOK, ServerInfo{Version: "causeway", Commit: "", KafkaClusterID: ""})
	})
	page, _ := fs.Sub(webFiles, "web")
	mux.Handle("GET /ui/", http.StripPrefix("/ui/", http.FileServerFS(page)))
	mux.HandleFunc("GET /connectors", w.listConnectors)
	mux.HandleFunc("POST /connectors", w.createConnector)
	mux.HandleFunc("GET /connectors/{name}", w.withConnector(func(rw http.ResponseWriter, _ *http.Request, c connectorView) {
		writeJSON(rw, http.StatusOK, c.info())
	}))
	mux.HandleFunc("DELETE /connectors/{name}", w.withConnector(func(rw http.ResponseWriter, req *http.Request, c connectorView) {
		w.writeOr500(rw, req, http.StatusNoContent, nil, kv{"config/" + c.name, nil}, kv{"target/" + c.name, nil})
	}))
	mux.HandleFunc("GET /connectors/{name}/config", w.withConnector(func(rw http.ResponseWriter, _ *http.Request, c connectorView) {
		writeJSON(rw, http.StatusOK, c.config)
	}))
	mux.HandleFunc("PUT /connectors/{name}/config", w.putConfig)
	mux.HandleFunc("GET /connectors/{name}/status", w.withConnector(func(rw http.ResponseWriter, _ *http.Request, c connectorView) {
		writeJSON(rw, http.StatusOK, c.status())
	}))
	mux.HandleFunc("GET /connectors/{name}/tasks", w.withConnector(func(rw http.ResponseWriter, _ *http.Request, c connectorView) {
		out := []TaskInfo{}
		for _, id := range c.info().Tasks {
			out = append(out, TaskInfo{ID: id, Config: c.config})
		}
		writeJSON(rw, http.StatusOK, out)
	}))
	mux.HandleFunc("GET /connectors/{name}/tasks/{task}/status", w.withConnector(func(rw http.ResponseWriter, req *http.Request, c connectorView) {
		st := c.status()
		id, err := strconv.Atoi(req.PathValue("task"))
		if err != nil || id < 0 || id >= len(st.Tasks) {
			writeError(rw, http.StatusNotFound, fmt.Sprintf("Task %s of connector %s not found", req.PathValue("task"), c.name))
			return
		}
		writeJSON(rw, http.StatusOK, st.Tasks[id])
	}))
	for path, state := range map[string]string{"pause": StatePaused, "resume": StateRunning, "stop": StateStopped} {
		code := http.StatusAccepted
		if path == "stop" {
			code = http.StatusNoContent
		}
		mux.HandleFunc("PUT /connectors/{name}/"+path, w.withConnector(func(rw http.ResponseWriter, req *http.Request, c connectorView) {
			b, _ := json.Marshal(targetRecord{State: state})
			w.writeOr500(rw, req, code, nil, kv{"target/" + c.name, b})
		}))
	}
	mux.HandleFunc("POST /connectors/{name}/restart", w.withConnector(w.restartConnector))
	mux.HandleFunc("POST /connectors/{name}/tasks/{task}/restart", w.withConnector(func(rw http.ResponseWriter, req *http.Request, c connectorView) {
		id, err := strconv.Atoi(req.PathValue("task"))
		if err != nil || id < 0 || id >= len(c.info().Tasks) {
			writeError(rw, http.StatusNotFound, fmt.Sprintf("Task %s of connector %s not found", req.PathValue("task"), c.name))
			return
		}
		target := fmt.Sprintf("%s/%d", c.name, id)
		b, _ := json.Marshal(restartRequest{Count: c.restarts[target].Count + 1})
		w.writeOr500(rw, req, http.StatusNoContent, nil, kv{"restart/" + target, b})
	}))
	mux.HandleFunc("POST /connectors/{name}/tasks/{task}/skip", w.withConnector(w.skipRecord))
	mux.HandleFunc("GET /connectors/{name}/offsets", w.withConnector(w.offsets))
	mux.HandleFunc("GET /connector-plugins", func(rw http.ResponseWriter, _ *http.Request) {
		out := []PluginInfo{}
		for _, class := range slices.Sorted(maps.Keys(w.plugins)) {
			out = append(out, PluginInfo{Class: class, Type: string(w.plugins[class].kind), Version: "causeway"})
		}
		writeJSON(rw, http.StatusOK, out)
	})
	mux.HandleFunc("GET /connector-plugins/{plugin}/config", func(rw http.ResponseWriter, req *http.Request) {
		p, ok := w.plugins[req.PathValue("plugin")]
		if !ok {
			writeError(rw, http.StatusNotFound, fmt.Sprintf("Unknown plugin %s.", req.PathValue("plugin")))
			return
		}
		out := []ConfigKeyInfo{}
		for i, k := range p.def().Keys {
			out = append(out, keyInfo(k, i))
		}
		writeJSON(rw, http.StatusOK, out)
	})
	mux.HandleFunc("PUT /connector-plugins/{plugin}/config/validate", w.validateConfig)
	mux.HandleFunc("POST /connectors/{name}/topics/{topic}", func(rw http.ResponseWriter, req *http.Request) {
		h := w.herder.httpTask(req.PathValue("name"))
		if h == nil {
			writeError(rw, http.StatusNotFound, fmt.Sprintf("this worker runs no task of an HTTP source named %s: post to a worker that does (GET /connectors/%s/status names them)",
				req.PathValue("name"), req.PathValue("name")))
			return
		}
		h.serve(rw, req, req.PathValue("topic"))
	})
}

// connectorView is what the state says of one connector, copied out.
type connectorView struct {
	name     string
	config   map[string]string
	target   string
	kind     string
	tasks    []string // worker by task id
	statuses map[string]taskStatus
	restarts map[string]restartRequest
	self     string
}

// connector copies out what the state says of name; ok is false when no
// such connector exists.
func (w *Worker) connector(name string) (c connectorView, ok bool) {
	w.store.view(func(st *clusterState) {
		cfg, exists := st.configs[name]
		if !exists {
			return
		}
		ok = true
		live := st.live(time.Now(), 3*w.cfg.Heartbeat)
		c = connectorView{name: name, config: maps.Clone(cfg), target: st.target(name), tasks: tasksOf(name, tasksMax(cfg), live),
			statuses: maps.Clone(st.statuses[name]), restarts: maps.Clone(st.restarts), self: w.cfg.WorkerID, kind: "unknown"}
		if p, known := w.plugins[cfg[keyClass]]; known {
			c.kind = string(p.kind)
		}
	})
	return c, ok
}

func (c connectorView) info() ConnectorInfo {
	tasks := []TaskID{}
	for i := range c.tasks {
		tasks = append(tasks, TaskID{Connector: c.name, Task: i})
	}
	return ConnectorInfo{Name: c.name, Config: c.config, Tasks: tasks, Type: c.kind}
}

// status is the connector's status: each task's as its worker last wrote
// it (UNASSIGNED until it has), and the connector's from its target state
// and its tasks.
func (c connectorView) status() ConnectorStateInfo {
	out := ConnectorStateInfo{Name: c.name, Type: c.kind, Tasks: []TaskState{}}
	failed := 0
	for id, worker := range c.tasks {
		st := TaskState{ID: id, State: State{State: StateUnassigned, WorkerID: worker}}
		if s, ok := c.statuses[worker]; ok && s.Task == id {
			st.State.State, st.Trace = s.State, s.Trace
		}
		if st.State.State == StateFailed {
			failed++
		}
		out.Tasks = append(out.Tasks, st)
	}
	out.Connector = State{State: StateRunning, WorkerID: c.self}
	if len(c.tasks) > 0 {
		out.Connector.WorkerID = c.tasks[0]
	}
	switch {
	case c.target != StateRunning:
		out.Connector.State = c.target
	case failed > 0 && failed == len(c.tasks):
		out.Connector.State, out.Connector.Trace = StateFailed, "every task failed; the first: "+out.Tasks[0].Trace
	case len(c.tasks) == 0:
		out.Connector.State = StateUnassigned
	}
	return out
}

// withConnector answers 404 for a connector that does not exist, and
// hands the others to f.
func (w *Worker) withConnector(f func(http.ResponseWriter, *http.Request, connectorView)) http.HandlerFunc {
	return func(rw http.ResponseWriter, req *http.Request) {
		if !w.synced(rw, req) {
			return
		}
		c, ok := w.connector(req.PathValue("name"))
		if !ok {
			writeError(rw, http.StatusNotFound, fmt.Sprintf("Connector %s not found", req.PathValue("name")))
			return
		}
		f(rw, req, c)
	}
}

// probes answers the connect worker's health. It is live while its
// herder is (herder.health). It is ready once it has read the cluster's
// state to its end, and degraded while some of its tasks are FAILED
// (still ready: restarting the worker would not mend a connector; its
// status and restart call do); not ready while the state topic cannot be
// read.
type probes struct{ w *Worker }

func (p probes) Live() error { return p.w.herder.health(time.Now()) }

func (p probes) Ready(ctx context.Context) (ready, degraded bool, reason string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := p.w.store.sync(ctx); err != nil {
		return false, false, "read the state topic: " + err.Error()
	}
	if failed := p.w.herder.failedTasks(); len(failed) > 0 {
		return true, true, "tasks FAILED: " + strings.Join(failed, ", ")
	}
	return true, false, ""
}

// synced reads the state topic to its end, so that an answer holds every
// write made before the request on any worker; on failure it answers 500.
func (w *Worker) synced(rw http.ResponseWriter, req *http.Request) bool {
	if err := w.store.sync(req.Context()); err != nil {
		writeError(rw, http.StatusInternalServerError, err.Error())
		return false
	}
	return true
}

func (w *Worker) listConnectors(rw http.ResponseWriter, req *http.Request) {
	if !w.synced(rw, req) {
		return
	}
	var names []string
	w.store.view(func(st *clusterState) { names = slices.Sorted(maps.Keys(st.configs)) })
	expand := req.URL.Query()["expand"]
	if len(expand) == 0 {
		writeJSON(rw, http.StatusOK, append([]string{}, names...))
		return
	}
	out := map[string]map[string]any{}
	for _, name := range names {
		c, ok := w.connector(name)
		if !ok {
			continue // deleted meanwhile
		}
		m := map[string]any{}
		for _, e := range expand {
			switch e {
			case "status":
				m["status"] = c.status()
			case "info":
				m["info"] = c.info()
			}
		}
		out[name] = m
	}
	writeJSON(rw, http.StatusOK, out)
}

func (w *Worker) createConnector(rw http.ResponseWriter, req *http.Request) {
	var body CreateConnectorRequest
	if !decodeBody(rw, req, &body, "a connector") {
		return
	}
	name := strings.TrimSpace(body.Name)
	if !validName(rw, name) {
		return
	}
	if !w.synced(rw, req) {
		return
	}
	if body.Config == nil {
		writeError(rw, http.StatusBadRequest, "the body has no config")
		return
	}
	if _, exists := w.connector(name); exists {
		writeError(rw, http.StatusConflict, fmt.Sprintf("Connector %s already exists", name))
		return
	}
	switch body.InitialState {
	case "", StateRunning, StatePaused, StateStopped:
	default:
		writeError(rw, http.StatusBadRequest, fmt.Sprintf("initial_state %q is not RUNNING, PAUSED or STOPPED", body.InitialState))
		return
	}
	w.store1(rw, req, name, body.Config, body.InitialState, http.StatusCreated)
}

func (w *Worker) putConfig(rw http.ResponseWriter, req *http.Request) {
	name := req.PathValue("name")
	if !validName(rw, name) {
		return
	}
	cfg, ok := decodeConfig(rw, req)
	if !ok {
		return
	}
	if !w.synced(rw, req) {
		return
	}
	code := http.StatusOK
	if _, exists := w.connector(name); !exists {
		code = http.StatusCreated
	}
	w.store1(rw, req, name, cfg, "", code)
}

// store1 validates a connector's configuration, writes it (and its
// initial target state), and answers with its info.
func (w *Worker) store1(rw http.ResponseWriter, req *http.Request, name string, cfg map[string]string, initial string, code int) {
	cfg = maps.Clone(cfg)
	if n, ok := cfg[keyName]; ok && n != name {
		writeError(rw, http.StatusBadRequest, fmt.Sprintf("Connector name configuration (%s) doesn't match connector name in the URL (%s)", n, name))
		return
	}
	cfg[keyName] = name
	v, err := w.validate(cfg)
	if err != nil {
		writeError(rw, http.StatusBadRequest, err.Error())
		return
	}
	if n := v.errorCount(); n > 0 {
		writeError(rw, http.StatusBadRequest, fmt.Sprintf("Connector configuration is invalid and contains the following %d error(s):\n%s\n"+
			"You can also find the above list of errors at the endpoint `/connector-plugins/{connectorType}/config/validate`", n, strings.Join(v.errs(), "\n")))
		return
	}
	b, err := json.Marshal(configRecord{Config: cfg})
	if err != nil {
		writeError(rw, http.StatusInternalServerError, err.Error())
		return
	}
	writes := []kv{}
	if initial != "" {
		t, _ := json.Marshal(targetRecord{State: initial})
		writes = append(writes, kv{"target/" + name, t})
	}
	writes = append(writes, kv{"config/" + name, b})
	w.writeOr500(rw, req, code, func() any {
		c, _ := w.connector(name)
		return c.info()
	}, writes...)
}

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
		out.Configs = append(out.Configs, ConfigInfo{
			Definition: ConfigKeyInfo{Name: e.Field, Type: string(connect.TypeString), Importance: string(connect.Low), Group: "Transforms",
				Width: "NONE", DisplayName: e.Field, Dependents: []string{}},
			Value: ConfigValueInfo{Name: e.Field, Value: &given, RecommendedValues: []string{}, Errors: []string{e.Reason}, Visible: true}})
	}
	writeJSON(rw, http.StatusOK, out)
}

// MaxRequestBody is the largest request body the REST API reads, in
// bytes; a larger one is answered 413. A connector's configuration is
// kept as one record of the state topic, and this leaves it room under
// Kafka's default record size limit (1 MB).
const MaxRequestBody = 512 << 10

// MaxNameLength is the longest connector name the REST API takes, in
// bytes. A name becomes part of its sink's consumer group, its clients'
// ids and the state topic's keys, and is quoted in answers.
const MaxNameLength = 249

// decodeBody reads a request's JSON body, of at most MaxRequestBody
// bytes, into v. On failure it answers 413 (too large) or 400, saying
// what the body should have been, and reports false. Strings in the body
// must be valid UTF-8: encoding/json would put U+FFFD in place of the
// bytes it cannot read, and store a name or setting nobody wrote.
func decodeBody(rw http.ResponseWriter, req *http.Request, v any, what string) bool {
	b, err := io.ReadAll(http.MaxBytesReader(rw, req.Body, MaxRequestBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(rw, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes", tooLarge.Limit))
		return false
	case err != nil:
		writeError(rw, http.StatusBadRequest, "read the body: "+err.Error())
		return false
	case !utf8.Valid(b):
		writeError(rw, http.StatusBadRequest, "the body is not valid UTF-8")
		return false
	}
	if err := json.Unmarshal(b, v); err != nil {
		writeError(rw, http.StatusBadRequest, fmt.Sprintf("the body is not %s: %v", what, err))
		return false
	}
	return true
}

// validName answers 400 for a connector name that is empty, not valid
// UTF-8 or longer than MaxNameLength, without quoting it, and reports
// whether the name is valid.
func validName(rw http.ResponseWriter, name string) bool {
	switch {
	case name == "":
		writeError(rw, http.StatusBadRequest, "the connector has no name")
	case !utf8.ValidString(name):
		writeError(rw, http.StatusBadRequest, "the connector's name is not valid UTF-8")
	case len(name) > MaxNameLength:
		writeError(rw, http.StatusBadRequest, fmt.Sprintf("the connector's name is %d bytes long, over %d", len(name), MaxNameLength))
	default:
		return true
	}
	return false
}

// decodeConfig reads a request's body as a connector's settings; on
// failure it answers 400 or 413.
func decodeConfig(rw http.ResponseWriter, req *http.Request) (map[string]string, bool) {
	var cfg map[string]string
	if !decodeBody(rw, req, &cfg, "a connector's configuration (an object of strings)") {
		return nil, false
	}
	if cfg == nil {
		writeError(rw, http.StatusBadRequest, "the body is not a connector's configuration (an object of strings): null")
		return nil, false
	}
	return cfg, true
}

// keyInfo is a setting's definition as Kafka Connect writes it.
func keyInfo(k connect.Key, order int) ConfigKeyInfo {
	var def *string
	if !k.Required {
		d := k.Default
		def = &d
	}
	return ConfigKeyInfo{Name: k.Name, Type: string(k.Type), Required: k.Required, DefaultValue: def, Importance: string(k.Importance),
		Documentation: k.Doc, Group: k.Group, OrderInGroup: order + 1, Width: "NONE", DisplayName: k.Name, Dependents: []string{}}
}

// kv is one write to the state topic.
type kv struct {
	key   string
	value []byte
}

// writeOr500 writes to the state topic, wakes the herder, and answers
// code with body's result (nil: no body).
func (w *Worker) writeOr500(rw http.ResponseWriter, req *http.Request, code int, body func() any, writes ...kv) {
	for _, x := range writes {
		if err := w.store.write(req.Context(), x.key, x.value); err != nil {
			writeError(rw, http.StatusInternalServerError, err.Error())
			return
		}
	}
	w.herder.poke()
	if body == nil {
		rw.WriteHeader(code)
		return
	}
	writeJSON(rw, code, body())
}

func writeJSON(rw http.ResponseWriter, code int, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	json.NewEncoder(rw).Encode(v) //nolint:errcheck // the client went away
}

func writeError(rw http.ResponseWriter, code int, msg string) {
	writeJSON(rw, code, ErrorMessage{ErrorCode: code, Message: msg})
}
