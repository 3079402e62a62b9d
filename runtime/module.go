package runtime

import (
	"context"
	"fmt"
	"os"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/framework"
)

// Module provides the worker and its HTTP server, started and stopped with
// the fx application. It needs a Config and a *framework.Topology; Run
// supplies both for a typical main.
var Module = fx.Module("runtime",
	fx.Provide(
		NewLogger,
		NewMetrics,
		NewWorker,
		newServer,
	),
	fx.Invoke(start),
	fx.WithLogger(func(log *zap.Logger) fxevent.Logger {
		return &fxevent.ZapLogger{Logger: log.Named("fx")}
	}),
)

// NewLogger returns a JSON logger for production, or a console one when
// Config.Development is set.
func NewLogger(cfg Config) (*zap.Logger, error) {
	if cfg.Development {
		return zap.NewDevelopment()
	}
	return zap.NewProduction()
}

func newServer(cfg Config, w *Worker, log *zap.Logger) *Server {
	if cfg.HTTPAddr == "" {
		return nil
	}
	return NewServer(cfg.HTTPAddr, w, log)
}

// start hooks the worker and server into the lifecycle, and shuts the
// application down with exit code 1 when the worker stops on its own.
func start(lc fx.Lifecycle, sd fx.Shutdowner, w *Worker, s *Server, log *zap.Logger) {
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
	if s != nil {
		lc.Append(fx.Hook{OnStart: s.Start, OnStop: s.Stop})
	}
}

// Run is a worker's whole main: it reads the configuration from the
// command line and environment, runs the topology until SIGINT or SIGTERM,
// and returns the process exit code.
//
//	func main() { os.Exit(runtime.Run(topology())) }
func Run(topo *framework.Topology, opts ...fx.Option) int {
	cfg, err := Load(os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	app := fx.New(append([]fx.Option{fx.Supply(cfg, topo), Module}, opts...)...)
	if err := app.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	startCtx, cancel := context.WithTimeout(context.Background(), fx.DefaultTimeout*4)
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sig := <-app.Wait()
	stopCtx, cancelStop := context.WithTimeout(context.Background(), cfg.ShutdownTimeout+fx.DefaultTimeout)
	defer cancelStop()
	if err := app.Stop(stopCtx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return sig.ExitCode
}
