package runtime

import (
	"context"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime/internal/server"
)

// Server serves a worker's operations endpoints (runtime/internal/server):
//
//	GET  /                     the worker's page: topology, tasks, held records (files embedded in the binary)
//	GET  /topology             JSON: the topology's name, Mermaid diagram and description
//	GET  /stores/{store}/get   one key (key=text or key64=base64url), as of the last commit;
//	                           clock64= (an encoded causal clock) waits, up to wait= ms, until the key's task
//	                           has committed what the clock names
//	GET  /stores/{store}/range keys in [from, to) or with a prefix, of the partitions held here
//	GET  /stores/{store}/windows  one key's windows starting in [since, until] (Unix ms or RFC 3339;
//	                           by default those that started in the last hour)
//	GET  /healthz              200 while the worker runs, 503 once it stops on a fatal error
//	GET  /readyz               200 when every assigned task is running; 503 with the reason
//	                           otherwise (see Status.Ready)
//	GET  /metrics              Prometheus metrics
//	GET  /status               JSON Status
//	POST /tasks/{id}/restart   rebuild a failed task, and no other, from its committed state
//	POST /tasks/{id}/skip      move a failed task past the record it failed on, into the dead-letter topic
//
// The POST endpoints require Config.AdminToken as a bearer token when one
// is set.
type Server = server.Server

// Served is what a Server serves: a StreamThread, or an Instance of several
// stream threads. Only this package's types implement it.
type Served interface {
	Status() Status
	Done() <-chan struct{}
	// Err is the fatal error that stops the worker, once there is one.
	Err() error
	Query(ctx context.Context, q Query) (Answer, error)
	RestartTask(ctx context.Context, id string) error
	SkipRecord(ctx context.Context, id string) (causal.Entry, error)
	DeadLetterTopic() string
	// advertise tells the other workers the server's address.
	advertise(addr string)
	// owner returns the HTTP address of the worker running task.
	owner(task string) (string, bool)
	served() servedParts
}

// servedParts is what a server reads of what it serves.
type servedParts struct {
	topo       *framework.Topology
	adminToken string
	metrics    *Metrics
	// instanceID names the worker in the queries it forwards.
	instanceID string
}

// NewServer returns a server for w on addr; it listens on Start.
func NewServer(addr string, w Served, log *zap.Logger) *Server {
	return server.New(addr, servedBy{w}, log)
}

// servedBy hands a Served to the server package.
type servedBy struct{ Served }

func (s servedBy) Advertise(addr string)            { s.advertise(addr) }
func (s servedBy) Owner(task string) (string, bool) { return s.owner(task) }

func (s servedBy) Parts() server.Parts {
	p := s.served()
	return server.Parts{Topology: p.topo, AdminToken: p.adminToken, Registry: p.metrics.Registry, InstanceID: p.instanceID}
}
