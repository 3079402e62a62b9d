// Package demoworker starts a worker for an example's demo: on the
// embedded broker's address, with a state directory of its own that goes
// when the worker stops, and warnings logged to stderr.
package demoworker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime"
)

// Options say how the demo's worker runs. Zero values take the worker's
// defaults.
type Options struct {
	ApplicationID    string
	BootstrapServers string
	// Client is the Kafka client library: see runtime.Clients.
	Client string
	// Partitions is the count of the topics the worker creates.
	Partitions int
	// LogLevel is the least level logged to stderr; zero: warnings.
	LogLevel zapcore.Level
}

// Start starts a worker running topo and returns the function that stops
// it and removes its state.
func Start(ctx context.Context, topo *framework.Topology, o Options) (stop func() error, err error) {
	state, err := os.MkdirTemp("", "causeway-"+o.ApplicationID+"-")
	if err != nil {
		return nil, err
	}
	cfg := runtime.DefaultConfig()
	cfg.Client = cmp.Or(o.Client, cfg.Client)
	cfg.ApplicationID, cfg.BootstrapServers, cfg.StateDir, cfg.HTTPAddr = o.ApplicationID, o.BootstrapServers, state, ""
	cfg.CreateTopics = true
	if o.Partitions > 0 {
		cfg.DefaultPartitions = o.Partitions
	}
	level := cmp.Or(o.LogLevel, zapcore.WarnLevel)
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), level))
	w, err := runtime.NewWorker(cfg, topo, log, nil)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(state))
	}
	if err := w.Start(ctx); err != nil {
		return nil, errors.Join(err, os.RemoveAll(state))
	}
	return func() error {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var errs []error
		if err := w.Stop(stopCtx); err != nil {
			errs = append(errs, fmt.Errorf("stop worker: %w", err))
		}
		return errors.Join(append(errs, os.RemoveAll(state))...)
	}, nil
}
