package connectworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/transform"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime/internal/reach"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// sourceRunner writes what a source task reads to Kafka, exactly once and
// in causal order.
//
// Records go in Kafka transactions, one per run of records for one
// topic, each with the source's offset after the run (a record of the
// offsets topic keyed by the connector). Every record carries the
// session's clock: after a transaction commits, the session claims the
// end of every partition it wrote, so each record claims every record
// written before it. The producer's transactional id is the connector's:
// a task that starts fences the one before it, whatever became of it.
//
//causeway:owned
type sourceRunner struct {
	connector string
	offsets   causal.Channel
	chain     *transform.Chain
	// out writes to Kafka, and holds the producer and the admin client.
	out      sourceWriter
	consumer transport.Consumer
	log      *zap.Logger
	tolerate bool
	// produced counts the records committed.
	produced *atomic.Int64

	session causal.Session
	// topics are those the source wrote, kept with its offset.
	topics []string
	offset []byte
	// envelope writes keys and values as the connector's converters
	// say (a JSON schema envelope, or the data alone).
	envelope sourceEnvelope
	// listener hears of each committed offset, when the task listens.
	listener connect.CommitListener
	// reach reaches the cluster (package reach), as the task starts.
	reach func(context.Context) error
}

// committedOffset is the record a source runner keeps in the offsets
// topic: the task's offset, and the topics it wrote, whose ends the next
// task claims before it writes anything.
type committedOffset struct {
	Offset []byte   `json:"offset"`
	Topics []string `json:"topics"`
	// Pending are the end records of source transactions whose other
	// records this commit wrote, as workers of an earlier version kept
	// them: written by the next task (writeEnds).
	Pending []pendingEnd `json:"pending,omitempty"`
}

func (w *Worker) newSourceRunner(name string, cfg map[string]string, chain *transform.Chain, log *zap.Logger, produced *atomic.Int64) (*sourceRunner, error) {
	creation, _ := parseTopicCreation(cfg) // validate checked it
	envelope, err := sourceEnvelopeOf(cfg)
	if err != nil {
		return nil, err
	}
	s := &sourceRunner{connector: name, chain: chain, log: log, tolerate: cfg[keyTolerance] == "all", produced: produced, envelope: envelope}
	settings := w.settings("connect-"+name, "source")
	producer, admin, err := w.producer(settings)
	if err != nil {
		return nil, err
	}
	s.out = newSourceWriter(producer, admin, creation, w.topicUsed(name))
	s.reach = func(ctx context.Context) error {
		return reach.Cluster(ctx, admin, w.cfg.Bootstrap, w.cfg.Kafka, w.cfg.ConnectTimeout, log)
	}
	if s.consumer, err = w.supplier.Consumer(settings); err != nil {
		s.close()
		return nil, err
	}
	s.offsets = causal.Channel{Topic: w.cfg.OffsetsTopic}
	return s, nil
}

// run polls t and writes what it returns until ctx is done or a write
// fails.
func (s *sourceRunner) run(ctx context.Context, t connect.SourceTask) (err error) {
	defer func() {
		cerr := s.consumer.Close()
		err = errors.Join(err, cerr, s.close(), t.Close())
	}()
	s.listener, _ = t.(connect.CommitListener)
	if err := s.start(ctx); err != nil {
		return err
	}
	if st, ok := t.(connect.Streaming); ok && st.Streaming() {
		return s.runAhead(ctx, t)
	}
	for ctx.Err() == nil {
		recs, err := t.Poll(ctx, s.offset)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("poll: %w", err)
		}
		if err := s.write(context.WithoutCancel(ctx), recs); err != nil {
			return err
		}
	}
	return nil
}

// start reaches the cluster, fences the task before, and reads the
// offset it committed.
func (s *sourceRunner) start(ctx context.Context) error {
	if err := s.reach(ctx); err != nil {
		return err
	}
	if _, err := createTopic(ctx, s.out.admin, s.offsets.Topic, 25, map[string]string{"cleanup.policy": "compact"}); err != nil {
		return fmt.Errorf("offsets topic: %w", err)
	}
	if err := s.out.producer.Init(ctx); err != nil {
		return fmt.Errorf("source producer: %w", err)
	}
	last, err := s.lastCommitted(ctx)
	if err != nil {
		return err
	}
	s.offset, s.topics = last.Offset, last.Topics
	// What the tasks before wrote is committed or aborted by now (the
	// producer's fencing ended their transactions): claim it all.
	if err := s.out.claimTopics(ctx, &s.session, s.topics); err != nil {
		return err
	}
	// Ends a task of an earlier version committed the transactions of,
	// and died before writing.
	return s.writeEnds(ctx, last.Pending)
}

// close closes the producer and the admin client.
func (s *sourceRunner) close() error {
	s.out.admin.Close()
	return s.out.producer.Close()
}

// lastCommitted reads the partition counts and the connector's last
// committed offset; none when the offsets topic does not exist yet.
func (s *sourceRunner) lastCommitted(ctx context.Context) (committedOffset, error) {
	if err := s.out.readCounts(ctx); err != nil {
		return committedOffset{}, err
	}
	n, ok := s.out.counts[s.offsets.Topic]
	if !ok {
		return committedOffset{}, nil // no source has committed yet
	}
	s.offsets.Partition = offsetsPartition(s.connector, n)
	return s.readOffset(ctx)
}

// offsetsPartition is the partition of the offsets topic a connector's
// offsets go to.
func offsetsPartition(connector string, partitions int32) int32 {
	return framework.PartitionFor([]byte(connector), partitions)
}

// readOffset reads the connector's last committed offset record.
func (s *sourceRunner) readOffset(ctx context.Context) (committedOffset, error) {
	var last committedOffset
	ends, err := s.out.admin.Ends(ctx, []causal.Channel{s.offsets})
	if err != nil {
		return last, err
	}
	low, _, err := s.consumer.Watermarks(s.offsets)
	if err != nil {
		return last, err
	}
	if err := s.consumer.Assign(map[causal.Channel]int64{s.offsets: low}); err != nil {
		return last, err
	}
	batch := make([]transport.Event, 0, 256)
	for pos := low; pos < ends[s.offsets]; {
		if ctx.Err() != nil {
			return last, ctx.Err()
		}
		batch = batch[:0]
		s.consumer.Poll(100*time.Millisecond, cap(batch), &batch)
		for _, ev := range batch {
			switch ev.Kind {
			case transport.EventRecord:
				pos = ev.Msg.Offset + 1
				if string(ev.Msg.Key) != s.connector {
					continue
				}
				last = committedOffset{}
				if ev.Msg.Value != nil {
					if err := json.Unmarshal(ev.Msg.Value, &last); err != nil {
						return last, fmt.Errorf("offsets topic %s@%d: %w", transport.PartitionString(s.offsets.Topic, s.offsets.Partition), ev.Msg.Offset, err)
					}
				}
			case transport.EventPosition:
				pos = max(pos, ev.Msg.Offset)
			case transport.EventFatal:
				return last, ev.Err
			}
		}
	}
	return last, nil
}

// write writes recs, transformed: the records of source transactions
// together (writeTxns), the others a transaction per run of records for
// one topic. A record the transforms refuse fails the task, or with
// errors.tolerance=all is left out; its offset still counts.
func (s *sourceRunner) write(ctx context.Context, recs []connect.SourceRecord) error {
	out, skipped, err := s.transformAll(recs)
	if err != nil {
		return err
	}
	return s.writeTransformed(ctx, out, skipped)
}

// writeTransformed is write after the transforms: out are the records
// left, skipped the offset of those left out at the end.
func (s *sourceRunner) writeTransformed(ctx context.Context, out []routedRecord, skipped []byte) (err error) {
	if skipped != nil {
		if len(out) == 0 {
			return s.writeRun(ctx, "", nil, skipped) // the offset alone
		}
		out[len(out)-1].src.Offset = skipped
	}
	for len(out) > 0 {
		n := 1
		txns := out[0].src.Transaction != ""
		for n < len(out) && (out[n].src.Transaction != "") == txns && (txns || out[n].t.Topic == out[0].t.Topic) {
			n++
		}
		if txns {
			err = s.writeTxns(ctx, out[:n])
		} else {
			err = s.writeRun(ctx, out[0].t.Topic, out[:n], nil)
		}
		if err != nil {
			return err
		}
		out = out[n:]
	}
	return nil
}

// transformAll runs recs through the transforms, and returns what is
// left, and the offset of the records left out at the end, which no
// record carries.
func (s *sourceRunner) transformAll(recs []connect.SourceRecord) ([]routedRecord, []byte, error) {
	out := make([]routedRecord, 0, len(recs))
	var skipped []byte // the offset of skipped records no record carries yet
	for _, r := range recs {
		t, err := s.chain.Apply(transform.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Headers: r.Headers,
			KeySchema: r.KeySchema, ValueSchema: r.ValueSchema})
		if err == nil {
			// The converters, as Kafka Connect runs them after the
			// transforms and under the same tolerance.
			t.Key, t.Value, err = s.envelope.write(t)
		}
		switch {
		case errors.Is(err, connect.ErrFiltered):
			if r.Offset != nil {
				skipped = r.Offset
			}
		case err == nil:
			if r.Offset == nil {
				r.Offset = skipped
			}
			skipped = nil
			out = append(out, routedRecord{t: t, src: r})
		case s.tolerate:
			s.log.Warn("record skipped", zap.String("topic", r.Topic), zap.Error(err))
			if r.Offset != nil {
				skipped = r.Offset
			}
		default:
			return nil, nil, fmt.Errorf("a record for %s: %w", r.Topic, err)
		}
	}
	return out, skipped, nil
}

// routedRecord is a source record and what the transforms made of it.
type routedRecord struct {
	t   transform.Record
	src connect.SourceRecord
}

// writeRun writes one run of records for topic, and the offset after
// them (or, with no records, offset), in one transaction, after which the
// session claims what it wrote (sourceWriter.write).
func (s *sourceRunner) writeRun(ctx context.Context, topic string, recs []routedRecord, offset []byte) error {
	if len(recs) > 0 {
		if err := s.out.ensureTopic(ctx, topic); err != nil {
			return err
		}
	}
	if offset == nil {
		offset = s.offset
	}
	topics := s.topics
	if len(recs) > 0 && !slices.Contains(topics, topic) {
		topics = append(slices.Clone(topics), topic)
	}
	for _, r := range recs {
		if r.src.Offset != nil {
			offset = r.src.Offset
		}
	}
	committed, err := s.out.write(ctx, &s.session, func(tx *sourceTxn) error {
		// The offset first, as writeTxns writes it.
		if err := s.offsetRecord(tx, committedOffset{Offset: offset, Topics: topics}); err != nil {
			return err
		}
		for _, r := range recs {
			if _, err := tx.record(topic, r.t.Key, r.t.Value, r.src.Timestamp, r.t.Headers); err != nil {
				return err
			}
		}
		return nil
	})
	if committed {
		// Committed, even when the claim after it failed.
		s.offset, s.topics = offset, topics
		s.produced.Add(int64(len(recs)))
		if err == nil {
			err = s.committed(ctx)
		}
	}
	return err
}

// committed tells a listening task that its offset is committed.
func (s *sourceRunner) committed(ctx context.Context) error {
	if s.listener == nil || s.offset == nil {
		return nil
	}
	if err := s.listener.Committed(ctx, s.offset); err != nil {
		return fmt.Errorf("the source's commit callback: %w", err)
	}
	return nil
}

// createTopic makes topic with partitions, and returns the partition
// counts once the cluster's metadata has it (a broker may answer the
// creation before its metadata shows the topic).
func createTopic(ctx context.Context, admin transport.Admin, topic string, partitions int32, configs map[string]string) (map[string]int32, error) {
	if err := admin.CreateTopics(ctx, []transport.TopicSpec{{Name: topic, Partitions: partitions, Configs: configs}}); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		counts, err := admin.PartitionCounts(ctx)
		if err != nil {
			return nil, err
		}
		if _, ok := counts[topic]; ok {
			return counts, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("topic %q was made but the cluster's metadata does not show it after 30s", topic)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}
