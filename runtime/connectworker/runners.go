package connectworker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/transform"
	"github.com/causeway-stream/causeway/runtime/sinkworker"
)

// runnerFor makes what runs task of the connector name from its
// configuration cfg.
func (w *Worker) runnerFor(name string, task int, cfg map[string]string, r *runner) (func(context.Context) error, error) {
	v, err := w.validate(cfg)
	if err != nil {
		return nil, err
	}
	if n := v.errorCount(); n > 0 {
		return nil, fmt.Errorf("the configuration has %d errors: %s", n, strings.Join(v.errs(), "; "))
	}
	chain, err := transform.Parse(cfg)
	if err != nil {
		return nil, err
	}
	p := v.plugin
	r.kind = p.kind
	own, err := p.def().Parse(cfg)
	if err != nil {
		return nil, err
	}
	log := w.log.With(zap.String("connector", name), zap.Int("task", task))
	switch {
	case p.sink != nil:
		convs, err := convertersFor(cfg)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			return w.runSink(ctx, name, task, cfg, p.sink, own, chain, convs, log, &r.counters, r.skip)
		}, nil
	case p.source != nil:
		return func(ctx context.Context) error {
			t, err := p.source.Open(ctx, name, own)
			if err != nil {
				return err
			}
			if rep, ok := t.(connect.Reporter); ok {
				r.counters.reporter.Store(&rep)
				defer r.counters.reporter.Store(nil)
			}
			if d, ok := t.(connect.Describer); ok {
				r.counters.describer.Store(&d)
				defer r.counters.describer.Store(nil)
			}
			s, err := w.newSourceRunner(name, cfg, chain, log, &r.counters.produced)
			if err != nil {
				return errors.Join(err, t.Close())
			}
			return s.run(ctx, t)
		}, nil
	default:
		h, err := w.newHTTPSource(name, task, cfg, own, chain, log, &r.counters.produced)
		if err != nil {
			return nil, err
		}
		r.http = h
		return h.run, nil
	}
}

// runSink runs a task of a sink connector until ctx is done.
func (w *Worker) runSink(ctx context.Context, name string, task int, cfg map[string]string, sink connect.Sink, own connect.Config,
	chain *transform.Chain, convs converters, log *zap.Logger, counters *taskCounters, skip map[causal.Channel]int64) error {
	topics := connect.SplitList(cfg[keyTopics])
	t, err := sink.Open(ctx, name, topics, own)
	if err != nil {
		return err
	}
	sw, err := sinkworker.New(sinkworker.Config{Connector: name, TaskID: task, Class: cfg[keyClass], Topics: topics, Task: t, Bootstrap: w.cfg.Bootstrap,
		Client: w.cfg.Client, Kafka: w.cfg.Kafka, InstanceID: fmt.Sprintf("%s-%d", w.cfg.WorkerID, task), ConnectTimeout: w.cfg.ConnectTimeout,
		GateOff: cfg[keyGate] == "false", TransactionTopic: cfg[keyTxnTopic], DeadLetterTopic: cfg[keyDeadLetter], ToleranceAll: cfg[keyTolerance] == "all",
		NoContextHeaders: cfg[keyContextHeaders] != "true",
		Skip:             skip, Convert: sinkConvert(chain, convs), Log: log, TopicUsed: w.topicUsed(name),
		MaxRetries: atLeast(cfg[keyMaxRetries], 0, 10), RetryBackoff: time.Duration(atLeast(cfg[keyRetryBackoff], 0, 3000)) * time.Millisecond,
		MaxRecordBytes: maxDeadLetterBytes})
	if err != nil {
		return errors.Join(err, t.Close())
	}
	counters.sink.Store(sw)
	return sw.Run(ctx)
}

// sinkConvert is what a sink does to each record before writing it: read
// its key and value with the connector's converters, then transform
// them, schemas and headers too. A record a Filter drops comes back with
// connect.ErrFiltered.
func sinkConvert(chain *transform.Chain, convs converters) func(connect.Record) (connect.Record, error) {
	return func(r connect.Record) (connect.Record, error) {
		var err error
		if convs.value != nil && r.Value != nil {
			if r.Value, r.ValueSchema, err = convs.value.Read(r.Topic, r.Value); err != nil {
				return r, fmt.Errorf("%s: %w", keyValueConverter, err)
			}
		}
		if convs.key != nil && r.Key != nil {
			if r.Key, r.KeySchema, err = convs.key.Read(r.Topic, r.Key); err != nil {
				return r, fmt.Errorf("%s: %w", keyKeyConverter, err)
			}
		}
		if chain.Empty() {
			return r, nil
		}
		t, err := chain.Apply(transform.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
			Key: r.Key, Value: r.Value, KeySchema: r.KeySchema, ValueSchema: r.ValueSchema, Headers: r.Headers})
		r.Topic, r.Key, r.Value, r.KeySchema, r.ValueSchema, r.Headers = t.Topic, t.Key, t.Value, t.KeySchema, t.ValueSchema, t.Headers
		return r, err
	}
}

// maxDeadLetterBytes bounds a sink's dead letters (sinkworker's
// MaxRecordBytes): under librdkafka's message.max.bytes, as the stream
// worker's --max-record-bytes is by default.
const maxDeadLetterBytes = 999_000
