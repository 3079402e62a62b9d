package connectworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

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

// serverInfo is what GET / answers: the worker's build (its main module's
// version and the commit it was built from, as the Go toolchain recorded
// them) and the Kafka cluster's id, as Kafka Connect's GET / gives its
// own. A cluster that does not say its id leaves it empty, and the
// worker goes on.
func serverInfo(ctx context.Context, admin transport.Admin, log *zap.Logger) ServerInfo {
	info := ServerInfo{Version: "(devel)"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				info.Commit = s.Value
			}
		}
	}
	// The cluster answered the state topic's reads already; a slow answer
	// here delays the worker's start by this much at most.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	id, err := admin.ClusterID(ctx)
	if err != nil {
		log.Warn("the Kafka cluster's id could not be read; GET / answers without it", zap.Error(err))
	}
	info.KafkaClusterID = id
	return info
}
