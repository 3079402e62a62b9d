package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/causeway-stream/causeway/framework"
)

// Module provides the worker process (an *Instance of Config.Threads
// stream threads) and its HTTP server, started and stopped with the fx
// application. It needs a Config and a *framework.Topology; Run supplies
// both for a typical main.
var Module = fx.Module("runtime",
	fx.Provide(
		NewLogger,
		NewMetrics,
		NewInstance,
		newServer,
	),
	fx.Invoke(start),
	fx.WithLogger(fxLogger),
)

// fxLogger sends fx's own events through the worker's logger, so JSON logs
// stay JSON; its routine lines (provides, invokes, hooks) are debug-level,
// its errors errors.
func fxLogger(log *zap.Logger) fxevent.Logger {
	l := &fxevent.ZapLogger{Logger: log.Named("fx")}
	l.UseLogLevel(zapcore.DebugLevel)
	return l
}

// NewLogger returns a JSON logger for production, or a console one when
// Config.Development is set, logging from Config.LogLevel up. Neither adds
// stack traces below a panic: the worker's errors say where they come
// from, and a trace through fx and the pump says nothing more.
func NewLogger(cfg Config) (*zap.Logger, error) {
	zc := zap.NewProductionConfig()
	if cfg.Development {
		zc = zap.NewDevelopmentConfig()
		zc.Development = false // warnings do not panic, nor carry traces
	}
	level, err := zapcore.ParseLevel(cmp.Or(cfg.LogLevel, "info"))
	if err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	zc.Level = zap.NewAtomicLevelAt(level)
	zc.DisableStacktrace = true
	return zc.Build()
}

func newServer(cfg Config, w *Instance, log *zap.Logger) *Server {
	if cfg.HTTPAddr == "" {
		return nil
	}
	return NewServer(cfg.HTTPAddr, w, log)
}

// start hooks the worker process and server into the lifecycle, and shuts
// the application down with exit code 1 when a thread stops on its own.
func start(lc fx.Lifecycle, sd fx.Shutdowner, w *Instance, s *Server, log *zap.Logger) {
	// The server first: /healthz, /readyz and /status answer while the
	// worker reaches Kafka and waits for its topics, and it stops last.
	if s != nil {
		lc.Append(fx.Hook{OnStart: s.Start, OnStop: s.Stop})
	}
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	lc.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			if err := w.Start(ctx); err != nil {
				return err
			}
			go func() {
				defer close(watched)
				select {
				case <-w.Done():
					if err := w.Err(); err != nil {
						log.Error("worker stopped", zap.Error(err))
						if err := sd.Shutdown(fx.ExitCode(1)); err != nil {
							log.Error("shutdown", zap.Error(err))
						}
					}
				case <-stopWatch:
				}
			}()
			return nil
		},
		OnStop: func(ctx context.Context) error {
			close(stopWatch)
			<-watched
			return w.Stop(ctx)
		},
	})
}

// Run is a worker's whole main: it reads the configuration from the
// command line and environment, runs the topology until SIGINT or SIGTERM,
// and returns the process exit code.
//
//	func main() {
//		topo, err := topology()
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		os.Exit(runtime.Run(topo))
//	}
//
// --help prints the flags to standard output and returns 0; a bad flag or
// setting prints the error and returns 2.
func Run(topo *framework.Topology, opts ...fx.Option) int {
	return run(topo, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, opts...)
}

// run is Run with its arguments, environment and outputs given.
func run(topo *framework.Topology, args []string, env func(string) string, stdout, stderr io.Writer, opts ...fx.Option) int {
	cfg, err := Load(args, env)
	if errors.Is(err, ErrHelp) {
		fmt.Fprint(stdout, err)
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	app := fx.New(append([]fx.Option{fx.Supply(cfg, topo), Module, fx.WithLogger(fxLogger)}, opts...)...)
	if err := app.Err(); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	// Start takes up to the connect timeout to reach the cluster, then up
	// to the topic wait timeout for missing topics, then creates topics
	// and joins the group.
	startCtx, cancel := context.WithTimeout(context.Background(), max(fx.DefaultTimeout*4, cfg.ConnectTimeout+cfg.TopicWaitTimeout+fx.DefaultTimeout*2))
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	sig := <-app.Wait()
	stopCtx, cancelStop := context.WithTimeout(context.Background(), 2*cfg.ShutdownTimeout+fx.DefaultTimeout)
	defer cancelStop()
	if err := app.Stop(stopCtx); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return sig.ExitCode
}
