package transport

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/causeway-stream/causeway/causal"
)

// Helpers makes the clients a worker keeps beside its group member and
// its transactional producer: the changelog reader of restores and
// standbys, the reader of global tables, and the client of the members
// topic. They are franz-go clients whatever the worker's transport, for
// franz-go fetches in batches without a call into C per record; they
// connect the way the settings given with --kafka ask (FranzConnection).
type Helpers struct {
	connect []kgo.Opt
}

// NewHelpers returns the helper clients' maker for the cluster at
// bootstrap (a comma-separated list), connecting as settings ask. It
// fails, naming the setting, when franz-go cannot follow one of them;
// the worker then reads changelogs through its own transport
// (FallbackReader) and does without what only helpers can do.
func NewHelpers(bootstrap string, settings map[string]string) (*Helpers, error) {
	opts, err := FranzConnection(settings)
	if err != nil {
		return nil, err
	}
	return &Helpers{connect: append([]kgo.Opt{kgo.SeedBrokers(strings.Split(bootstrap, ",")...)}, opts...)}, nil
}

// Changelog returns a changelog source that reads with helper clients
// and asks offsets for partitions' bounds.
func (h *Helpers) Changelog(offsets OffsetSource) ChangelogSource {
	return NewFranzChangelog(offsets, h.connect)
}

// FollowedRecord is one record a Follower read: a record, or, when Marker
// is set, a transaction's commit or abort marker, which moves its
// partition's position past it and holds nothing else.
type FollowedRecord struct {
	Message
	Marker bool
}

// Follower reads partitions from their start, outside any group, and
// writes records outside any transaction. Its methods may be called from
// more than one goroutine.
type Follower struct {
	cl *kgo.Client
}

// FollowPartitions returns a follower of chs that reads committed
// records only, and the transaction markers among them.
func (h *Helpers) FollowPartitions(chs []causal.Channel) (*Follower, error) {
	parts := map[string]map[int32]kgo.Offset{}
	for _, ch := range chs {
		if parts[ch.Topic] == nil {
			parts[ch.Topic] = map[int32]kgo.Offset{}
		}
		parts[ch.Topic][ch.Partition] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append(slices.Clip(h.connect), kgo.ConsumePartitions(parts),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return &Follower{cl: cl}, nil
}

// FollowTopic returns a follower of every partition of topic, from the
// start, which writes at once (no linger): the members topic's client.
func (h *Helpers) FollowTopic(topic string) (*Follower, error) {
	cl, err := kgo.NewClient(append(slices.Clip(h.connect), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ProducerLinger(0))...)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return &Follower{cl: cl}, nil
}

// CommittedEnds returns the end of every partition of topics for a
// reader of committed records: each one's last stable offset now.
func (f *Follower) CommittedEnds(ctx context.Context, topics []string) (map[causal.Channel]int64, error) {
	ends, err := kadm.NewClient(f.cl).ListCommittedOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, franzError(err)
	}
	out := map[causal.Channel]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		out[causal.Channel{Topic: o.Topic, Partition: o.Partition}] = o.Offset
	})
	return out, nil
}

// Poll waits for records, or until ctx is done, and returns what it read
// and the errors of the partitions it could not read, joined, each
// naming its partition; both may come at once. A ctx done is no error.
func (f *Follower) Poll(ctx context.Context) ([]FollowedRecord, error) {
	fs := f.cl.PollFetches(ctx)
	var ferr error
	fs.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			ferr = errors.Join(ferr, fmt.Errorf("%s: %w", PartitionString(topic, p), franzError(err)))
		}
	})
	var out []FollowedRecord
	fs.EachRecord(func(r *kgo.Record) {
		out = append(out, FollowedRecord{
			Message: Message{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp},
			Marker:  r.Attrs.IsControl(),
		})
	})
	return out, ferr
}

// Produce writes a record to topic without waiting for it; done, when
// not nil, is called with the outcome.
func (f *Follower) Produce(topic string, key, value []byte, done func(error)) {
	f.cl.Produce(context.Background(), &kgo.Record{Topic: topic, Key: key, Value: value}, func(_ *kgo.Record, err error) {
		if done != nil {
			done(err)
		}
	})
}

// ProduceSync writes a record to topic and waits for it within ctx.
func (f *Follower) ProduceSync(ctx context.Context, topic string, key, value []byte) error {
	return f.cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: key, Value: value}).FirstErr()
}

// Close closes the client.
func (f *Follower) Close() { f.cl.Close() }
