package transport

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/causeway-stream/causeway/causal"
)

// franzChangelog reads changelog partitions with franz-go, which fetches
// records in batches without a call into C per record: a restore reads
// several times faster than through librdkafka's per-message poll (see
// docs/benchmarks.md). The worker uses it when franz-go can connect as the
// librdkafka settings given with --kafka ask (franzConnection), and
// kafkaChangelog otherwise.
type franzChangelog struct {
	Watermarks
	// connect are the options that reach the cluster.
	connect []kgo.Opt
}

// NewFranzChangelog returns a changelog source that reads with franz-go
// clients made with connect, and asks offsets for partition bounds.
func NewFranzChangelog(offsets OffsetSource, connect []kgo.Opt) ChangelogSource {
	return &franzChangelog{Watermarks: Watermarks{Offsets: offsets}, connect: connect}
}

func (f *franzChangelog) Read(stop <-chan struct{}, from map[causal.Channel]int64, apply func(ch causal.Channel, key, value []byte) error,
	done func(ch causal.Channel, end int64) error) error {
	if len(from) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	var topics []string
	for ch := range from {
		if !slices.Contains(topics, ch.Topic) {
			topics = append(topics, ch.Topic)
		}
	}
	adm, err := kgo.NewClient(f.connect...)
	if err != nil {
		return fmt.Errorf("restore client: %w", err)
	}
	// The end of each partition for a read_committed reader: its last
	// stable offset now.
	lso, err := kadm.NewClient(adm).ListCommittedOffsets(ctx, topics...)
	adm.Close()
	if err == nil {
		err = lso.Error()
	}
	if err != nil {
		return stopped(stop, fmt.Errorf("end offsets of %v: %w", topics, err))
	}
	want := map[causal.Channel]int64{}
	assign := map[string]map[int32]kgo.Offset{}
	for ch, off := range from {
		end, ok := lso.Lookup(ch.Topic, ch.Partition)
		if !ok || end.Offset <= off {
			if err := done(ch, off); err != nil {
				return err
			}
			continue
		}
		want[ch] = end.Offset
		if assign[ch.Topic] == nil {
			assign[ch.Topic] = map[int32]kgo.Offset{}
		}
		assign[ch.Topic][ch.Partition] = kgo.NewOffset().At(off)
	}
	if len(want) == 0 {
		return nil
	}
	// Up to 64 MiB a fetch, but franz-go's 1 MiB a partition: a larger
	// share makes the first fetch a response the broker takes long to
	// build, and nothing is applied meanwhile (16 MiB a partition took a
	// second longer to the first record of a 5-million-record restore).
	cl, err := kgo.NewClient(append(slices.Clip(f.connect), kgo.ConsumePartitions(assign),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.FetchMaxBytes(64<<20), kgo.WithPools(&recordPool{}))...)
	if err != nil {
		return fmt.Errorf("restore client: %w", err)
	}
	defer cl.Close()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return stopped(stop, err)
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("read changelog %s: %w", PartitionString(topic, p), err))
		})
		if ferr != nil {
			return ferr
		}
		var aerr error
		fs.EachRecord(func(r *kgo.Record) {
			ch := causal.Channel{Topic: r.Topic, Partition: r.Partition}
			end, ok := want[ch]
			if aerr != nil || !ok {
				return
			}
			if !r.Attrs.IsControl() {
				// apply keeps the key and the value, which lie in the
				// fetched response, not in the pooled record.
				aerr = apply(ch, r.Key, r.Value)
			}
			next := r.Offset + 1
			r.Recycle()
			if aerr == nil && next >= end {
				delete(want, ch)
				aerr = done(ch, next)
			}
		})
		if aerr != nil {
			return aerr
		}
	}
	return nil
}

// recordPool hands franz-go the slices it decodes fetched records into,
// and takes them back once every record of a slice is recycled: a restore
// decodes millions of records, and allocating each anew made the garbage
// collector a quarter of its work. The group consumer does without one
// (see franzConsumer).
type recordPool struct{ p sync.Pool }

func (p *recordPool) GetRecords(n int) []kgo.Record {
	if s, ok := p.p.Get().(*[]kgo.Record); ok && cap(*s) >= n {
		return (*s)[:0]
	}
	return make([]kgo.Record, 0, max(n, 1024))
}

func (p *recordPool) PutRecords(s []kgo.Record) { p.p.Put(&s) }

// stopped turns an error met because the read was stopped into
// ErrStopped.
func stopped(stop <-chan struct{}, err error) error {
	select {
	case <-stop:
		return ErrStopped
	default:
		return err
	}
}
