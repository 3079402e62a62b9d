//go:build cgo

package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
	"github.com/causeway-stream/causeway/runtime"
)

// pipeline is one configuration under test: it reads topics.in and writes
// every record to topics.out, exactly once, until stopped.
type pipeline interface {
	start(ctx context.Context) error
	// commitSeconds is the time spent committing transactions so far.
	commitSeconds() float64
	stop() error
}

type topics struct {
	in, in2, mid, mid2, out string
	group                   string
	sideWritten             []int64 // side records written so far, per partition
	checkpoints             string  // compacted topic for the checkpointing hand loop
}

// consumerTuned and producerTuned are the librdkafka settings of the
// hand-written loop: the same fetch, queue and linger choices as the
// worker's (docs/operations.md), so both sides get the client at its best.
func consumerTuned(addr string) kafka.ConfigMap {
	return kafka.ConfigMap{
		"bootstrap.servers":          addr,
		"fetch.wait.max.ms":          10,
		"queued.min.messages":        100000,
		"queued.max.messages.kbytes": 262144,
		"max.partition.fetch.bytes":  4 << 20,
		"fetch.max.bytes":            64 << 20,
		"enable.metrics.push":        false,
	}
}

func producerTuned(addr string) kafka.ConfigMap {
	return kafka.ConfigMap{
		"bootstrap.servers":            addr,
		"linger.ms":                    5,
		"batch.size":                   1 << 20,
		"queue.buffering.max.messages": 1000000,
		"queue.buffering.max.kbytes":   1 << 20,
		"go.delivery.reports":          false,
		"enable.metrics.push":          false,
	}
}

// commitTimer adds up the time a loop spends committing; commitSeconds may
// be read while the loop runs.
type commitTimer struct {
	mu      sync.Mutex
	seconds float64
}

func (c *commitTimer) add(d time.Duration) {
	c.mu.Lock()
	c.seconds += d.Seconds()
	c.mu.Unlock()
}

func (c *commitTimer) commitSeconds() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seconds
}

// handLoop is what a user writes without a framework: poll, produce, and
// every 100 ms send the consumer's positions and commit the transaction.
type handLoop struct {
	addr string
	t    topics
	// checkpoints, when set, also writes one record per assigned input
	// partition to a compacted topic in every transaction, as Causeway does
	// with its task checkpoints: the loop then pays for the same extra
	// partitions per transaction.
	checkpoints bool
	// byKey places outputs by their key (librdkafka's partitioner), as
	// Causeway and Kafka Streams do, instead of on the input's partition.
	byKey bool
	// padHeader lengthens the clock header of every output by this many
	// bytes, to tell what the stamp's extra length costs by itself.
	padHeader int
	c         *kafka.Consumer
	p         *kafka.Producer
	done      chan struct{}
	quit      chan struct{}
	err       error
	commitTimer
}

func (h *handLoop) start(ctx context.Context) error {
	cc := consumerTuned(h.addr)
	cc["group.id"], cc["isolation.level"], cc["enable.auto.commit"], cc["auto.offset.reset"] = h.t.group, "read_committed", false, "earliest"
	var err error
	if h.c, err = kafka.NewConsumer(&cc); err != nil {
		return err
	}
	pc := producerTuned(h.addr)
	pc["transactional.id"] = h.t.group + "-tx"
	pc["partitioner"] = "murmur2_random" // where a keyed loop puts records: the same partitions Causeway picks
	if h.p, err = kafka.NewProducer(&pc); err != nil {
		return err
	}
	if err := h.p.InitTransactions(ctx); err != nil {
		return err
	}
	if err := h.c.Subscribe(h.t.in, nil); err != nil {
		return err
	}
	h.done, h.quit = make(chan struct{}), make(chan struct{})
	go h.run()
	return nil
}

func (h *handLoop) run() {
	defer close(h.done)
	out := h.t.out
	var padded []byte // reused: Produce copies it
	if err := h.p.BeginTransaction(); err != nil {
		h.err = err
		return
	}
	next := time.Now().Add(100 * time.Millisecond)
	dirty := false
	for {
		select {
		case <-h.quit:
			return
		default:
		}
		if m, ok := h.c.Poll(10).(*kafka.Message); ok && m.TopicPartition.Error == nil {
			part := m.TopicPartition.Partition
			if h.byKey {
				part = kafka.PartitionAny
			}
			headers := m.Headers
			if h.padHeader > 0 && len(headers) == 1 {
				padded = append(append(padded[:0], headers[0].Value...), make([]byte, h.padHeader)...)
				headers = []kafka.Header{{Key: headers[0].Key, Value: padded}}
			}
			msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &out, Partition: part},
				Key: m.Key, Value: m.Value, Headers: headers, Timestamp: m.Timestamp}
			for {
				err := h.p.Produce(msg, nil)
				var ke kafka.Error
				if errors.As(err, &ke) && ke.Code() == kafka.ErrQueueFull {
					h.p.Flush(10)
					continue
				}
				if err != nil {
					h.err = err
					return
				}
				break
			}
			dirty = true
		}
		if time.Now().After(next) {
			next = time.Now().Add(100 * time.Millisecond)
			if !dirty {
				continue
			}
			began := time.Now()
			if err := h.commit(); err != nil {
				h.err = err
				return
			}
			h.add(time.Since(began))
			dirty = false
		}
	}
}

func (h *handLoop) commit() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	parts, err := h.c.Assignment()
	if err != nil {
		return err
	}
	pos, err := h.c.Position(parts)
	if err != nil {
		return err
	}
	if h.checkpoints {
		cp := h.t.checkpoints
		for _, tp := range pos {
			msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &cp, Partition: tp.Partition},
				Key: []byte("checkpoint-" + strconv.Itoa(int(tp.Partition))), Value: []byte(tp.Offset.String())}
			if err := h.p.Produce(msg, nil); err != nil {
				return err
			}
		}
	}
	md, err := h.c.GetConsumerGroupMetadata()
	if err != nil {
		return err
	}
	if err := h.p.SendOffsetsToTransaction(ctx, pos, md); err != nil {
		return err
	}
	if err := h.p.CommitTransaction(ctx); err != nil {
		return err
	}
	return h.p.BeginTransaction()
}

func (h *handLoop) stop() error {
	close(h.quit)
	<-h.done
	h.c.Close()
	h.p.Close()
	return h.err
}

// franzLoop is the same loop on franz-go's GroupTransactSession.
type franzLoop struct {
	addr   string
	t      topics
	s      *kgo.GroupTransactSession
	done   chan struct{}
	cancel context.CancelFunc
	err    error
	commitTimer
}

func (f *franzLoop) start(context.Context) error {
	var err error
	f.s, err = kgo.NewGroupTransactSession(
		kgo.SeedBrokers(f.addr),
		kgo.ConsumerGroup(f.t.group),
		kgo.ConsumeTopics(f.t.in),
		kgo.TransactionalID(f.t.group+"-tx"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.FetchMaxWait(10*time.Millisecond),
	)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.done = cancel, make(chan struct{})
	go f.run(ctx)
	return nil
}

func (f *franzLoop) run(ctx context.Context) {
	defer close(f.done)
	if err := f.s.Begin(); err != nil {
		f.err = err
		return
	}
	next := time.Now().Add(100 * time.Millisecond)
	dirty := false
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		fetches := f.s.PollFetches(pctx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) {
			f.s.Produce(ctx, &kgo.Record{Topic: f.t.out, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}, nil)
			dirty = true
		})
		if time.Now().After(next) {
			next = time.Now().Add(100 * time.Millisecond)
			if !dirty {
				continue
			}
			began := time.Now()
			if _, err := f.s.End(ctx, kgo.TryCommit); err != nil {
				if ctx.Err() == nil {
					f.err = err
				}
				return
			}
			if err := f.s.Begin(); err != nil {
				f.err = err
				return
			}
			f.add(time.Since(began))
			dirty = false
		}
	}
}

func (f *franzLoop) stop() error {
	f.cancel()
	<-f.done
	f.s.Close()
	return f.err
}

// worker runs a Causeway topology.
type worker struct {
	addr    string
	t       topics
	gateOff bool
	twoHop  bool
	// byKey places outputs by key (murmur2), Causeway's default; otherwise
	// they keep the input's partition (framework.KeepPartition), as the
	// hand-written loop does.
	byKey bool
	// fused runs three stateless steps fused into one processor by the
	// DSL; three runs the same steps as three processors, with a topic
	// between each two.
	fused, three bool
	// threads is the worker's --threads, client its --client.
	threads int
	client  string
	dir     string
	w       *runtime.Instance
	m       *runtime.Metrics
}

func passThrough() framework.Processor {
	return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error { return ctx.Forward(rec) })
}

// raw reads keys and values as bytes.
var raw = serde.Codec[[]byte, []byte]{Key: serde.Bytes(), Value: serde.Bytes()}

// The three stateless steps of the fused and three-processor runs: a
// value mapping, a filter and a peek, each as cheap as a step can be, so
// that what is measured is what running them as one processor or as three
// costs.
func sameValue(_, v []byte) ([]byte, error) { return v, nil }
func nonEmpty(_, v []byte) bool             { return len(v) > 0 }
func look(_, _ []byte)                      {}

// chainSteps attaches the three steps to s.
func chainSteps(s dsl.Stream[[]byte, []byte]) dsl.Stream[[]byte, []byte] {
	return dsl.MapValues(s, sameValue).Filter(nonEmpty).Peek(look)
}

func (w *worker) topology() (*framework.Topology, error) {
	b := framework.NewBuilder("bench")
	var place []framework.OutputOpt
	if !w.byKey {
		place = append(place, framework.KeepPartition())
	}
	switch {
	case w.fused:
		fb := dsl.NewBuilder("bench")
		chainSteps(dsl.From(fb, w.t.in, raw)).To(w.t.out, place...)
		return fb.Build()
	case w.three:
		return b.Processor("map", operators.MapValues(raw, serde.Bytes(), sameValue), framework.From(w.t.in), framework.To(w.t.mid, place...)).
			Processor("filter", operators.Filter(raw, nonEmpty), framework.From(w.t.mid), framework.To(w.t.mid2, place...)).
			Processor("peek", operators.Peek(raw, look), framework.From(w.t.mid2), framework.To(w.t.out, place...)).
			Build()
	}
	if !w.twoHop {
		return b.Processor("pass", passThrough, framework.From(w.t.in), framework.To(w.t.out, place...)).Build()
	}
	in2 := w.t.in2
	return b.Processor("first", passThrough, framework.From(w.t.in), framework.To(w.t.mid, place...)).
		Processor("second", func() framework.Processor {
			return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
				if rec.Topic == in2 {
					return nil // the side input only has to be delivered before what claims it
				}
				return ctx.Forward(rec)
			})
		}, framework.From(w.t.mid, w.t.in2), framework.To(w.t.out, place...)).Build()
}

func (w *worker) start(ctx context.Context) error {
	topo, err := w.topology()
	if err != nil {
		return err
	}
	cfg := runtime.DefaultConfig()
	cfg.ApplicationID, cfg.BootstrapServers, cfg.StateDir, cfg.HTTPAddr = w.t.group, w.addr, w.dir, ""
	cfg.GateOff, cfg.CreateTopics = w.gateOff, false
	// The load's clocks claim records of upstream topics that do not exist
	// (clockFor): checked, every record would be bad input. The cost of the
	// check on claims that pass is measured by BenchmarkGateHeader.
	cfg.CheckClaims = false
	cfg.Threads = w.threads
	cfg.Client = w.client
	w.m = runtime.NewMetrics()
	if w.w, err = runtime.NewInstance(cfg, topo, zap.NewNop(), w.m); err != nil {
		return err
	}
	return w.w.Start(ctx)
}

func (w *worker) commitSeconds() float64 {
	var m dto.Metric
	if err := w.m.CommitSeconds.(prometheus.Metric).Write(&m); err != nil {
		return 0
	}
	return m.GetHistogram().GetSampleSum()
}

func (w *worker) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.w.Stop(ctx); err != nil {
		return fmt.Errorf("stop worker: %w", err)
	}
	return nil
}
