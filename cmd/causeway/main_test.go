package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCommands(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		switch {
		case r.URL.Path == "/status":
			_, _ = rw.Write([]byte(`{"application_id":"shop","instance_id":"i1","ready":true,` +
				`"tasks":[{"id":"ledger/0","state":"FAILED","held":2,"last_error":"corrupt clock header on payments/0 at offset 7"}]}`))
		case r.Header.Get("Authorization") != "Bearer t0k":
			http.Error(rw, "needs the admin token", http.StatusUnauthorized)
		case strings.HasSuffix(r.URL.Path, "/skip"):
			rw.WriteHeader(http.StatusAccepted)
			_, _ = rw.Write([]byte("task ledger/0 restarted past payments/0@7\n"))
		default:
			http.Error(rw, "no such task", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	env := func(k string) string { return map[string]string{"CAUSEWAY_ADMIN_TOKEN": "t0k"}[k] }
	noEnv := func(string) string { return "" }
	tests := []struct {
		name       string
		args       []string
		env        func(string) string
		wantCode   int
		wantOut    string
		wantErr    string
		wantCalled string
	}{
		{"status", []string{"-worker", addr, "status"}, noEnv, 0, "ledger/0  FAILED  2     corrupt clock header on payments/0 at offset 7", "", "GET /status "},
		{"skip with the token from the environment", []string{"-worker", addr, "skip", "ledger/0"}, env, 0, "restarted past payments/0@7", "", "POST /tasks/ledger/0/skip Bearer t0k"},
		{"skip without a token", []string{"-worker", addr, "skip", "ledger/0"}, noEnv, 1, "", "401 Unauthorized", "POST /tasks/ledger/0/skip "},
		{"restart of a task the worker does not run", []string{"-worker", addr, "-token", "t0k", "restart", "nope/9"}, noEnv, 1, "", "404 Not Found", "POST /tasks/nope/9/restart Bearer t0k"},
		{"a command without its task", []string{"-worker", addr, "skip"}, noEnv, 2, "", "Usage:", ""},
		{"connect without bootstrap servers", []string{"connect"}, noEnv, 2, "", "Usage: causeway connect", ""},
		{"connect with a Kafka setting that is not one", []string{"connect", "--bootstrap-servers", "127.0.0.1:1", "--kafka", "nope"}, noEnv, 2, "", `"nope" is not key=value`, ""},
		{"connect with a log level that is not one", []string{"connect", "--bootstrap-servers", "127.0.0.1:1", "--log-level", "loud"}, noEnv, 2, "", `--log-level: unrecognized level: "loud"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got = nil
			var stdout, stderr strings.Builder
			code := run(context.Background(), tt.args, tt.env, &stdout, &stderr)
			assert.Equal(t, tt.wantCode, code, stderr.String())
			assert.Contains(t, stdout.String(), tt.wantOut)
			assert.Contains(t, stderr.String(), tt.wantErr)
			if tt.wantCalled == "" {
				assert.Empty(t, got)
			} else {
				assert.Equal(t, []string{tt.wantCalled}, got)
			}
		})
	}
}
