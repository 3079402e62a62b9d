package connectworker

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// webFiles are the worker's page, at /ui/.
//
//go:embed web
var webFiles embed.FS

// routes adds the REST API and the page to the worker's server, which
// answers /healthz, /readyz and /metrics itself (probes).
func (w *Worker) routes() {
	mux := w.server
	// Kafka Connect answers an unknown path or method in its error shape
	// too, with the HTTP status line as the message.
	mux.OnUnmatched(func(rw http.ResponseWriter, _ *http.Request, code int) {
		writeError(rw, code, fmt.Sprintf("HTTP %d %s", code, http.StatusText(code)))
	})
	mux.HandleFunc("GET /{$}", func(rw http.ResponseWriter, _ *http.Request) {
		writeJSON(rw, http.StatusOK, w.info)
	})
	page, _ := fs.Sub(webFiles, "web")
	mux.Handle("GET /ui/", http.StripPrefix("/ui/", http.FileServerFS(page)))
	mux.HandleFunc("GET /connectors", w.listConnectors)
	mux.HandleFunc("POST /connectors", w.createConnector)
	mux.HandleFunc("GET /connectors/{name}", w.withConnector(func(rw http.ResponseWriter, _ *http.Request, c connectorView) {
		writeJSON(rw, http.StatusOK, c.info())
	}))
	mux.HandleFunc("DELETE /connectors/{name}", w.withConnector(func(rw http.ResponseWriter, req *http.Request, c connectorView) {
		w.writeOr500(rw, req, http.StatusNoContent, nil, append(w.topicTombstones(c.name), kv{"config/" + c.name, nil}, kv{"target/" + c.name, nil})...)
	}))
	mux.HandleFunc("GET /connectors/{name}/config", w.withConnector(func(rw http.ResponseWriter, _ *http.Request, c connectorView) {
		writeJSON(rw, http.StatusOK, c.config)
	}))
	mux.HandleFunc("PUT /connectors/{name}/config", w.putConfig)
	mux.HandleFunc("PATCH /connectors/{name}/config", w.withConnector(w.patchConfig))
	mux.HandleFunc("GET /health", w.health)
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
	mux.HandleFunc("PATCH /connectors/{name}/offsets", w.withConnector(w.alterOffsets))
	mux.HandleFunc("GET /connectors/{name}/topics", w.withConnector(w.activeTopics))
	mux.HandleFunc("PUT /connectors/{name}/topics/reset", w.withConnector(func(rw http.ResponseWriter, req *http.Request, c connectorView) {
		w.writeOr500(rw, req, http.StatusOK, nil, w.topicTombstones(c.name)...)
	}))
	mux.HandleFunc("DELETE /connectors/{name}/offsets", w.withConnector(w.alterOffsets))
	mux.HandleFunc("GET /connector-plugins", func(rw http.ResponseWriter, _ *http.Request) {
		out := []PluginInfo{}
		for _, class := range slices.Sorted(maps.Keys(w.plugins)) {
			out = append(out, PluginInfo{Class: class, Type: string(w.plugins[class].kind), Version: "causeway"})
		}
		for _, class := range slices.Sorted(maps.Keys(classAliases)) {
			if p, ok := w.pluginOf(class); ok && strings.Contains(class, ".") {
				out = append(out, PluginInfo{Class: class, Type: string(p.kind), Version: "causeway (" + p.class + ")"})
			}
		}
		writeJSON(rw, http.StatusOK, out)
	})
	mux.HandleFunc("GET /connector-plugins/{plugin}/config", func(rw http.ResponseWriter, req *http.Request) {
		p, ok := w.pluginOf(req.PathValue("plugin"))
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
	name   string
	config map[string]string
	target string
	kind   string
	// servedBy is the plugin serving an aliased class (ConnectorStateInfo.ServedBy).
	servedBy string
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
		if p, known := w.pluginOf(cfg[keyClass]); known {
			c.kind = string(p.kind)
			if p.class != cfg[keyClass] {
				c.servedBy = p.class
			}
		}
		if c.target == StateStopped {
			// A stopped connector has no tasks (KIP-875): its info, status
			// and task calls show none until it is resumed.
			c.tasks = nil
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
	out := ConnectorStateInfo{Name: c.name, Type: c.kind, Tasks: []TaskState{}, ServedBy: c.servedBy}
	failed := 0
	for id, worker := range c.tasks {
		st := TaskState{ID: id, State: State{State: StateUnassigned, WorkerID: worker}}
		if s, ok := c.statuses[worker]; ok && s.Task == id {
			st.State.State, st.Trace, st.Facts = s.State, s.Trace, s.Facts
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
		if code == http.StatusCreated {
			rw.Header().Set("Location", "/connectors/"+url.PathEscape(name))
		}
		c, _ := w.connector(name)
		return c.info()
	}, writes...)
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
