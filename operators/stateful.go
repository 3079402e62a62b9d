package operators

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/framework/store"
)

// aggregate is the processor behind Count, Reduce and Aggregate: it keeps
// one aggregate per key in a key-value store and emits the new aggregate
// after each record, keyed as the input.
type aggregate[K, V, A any] struct {
	in    serde.Codec[K, V]
	agg   serde.Serde[A]
	store string
	init  func() A
	fn    func(K, V, A) (A, error)
	kv    store.KeyValue
}

var (
	_ framework.Processor = (*aggregate[string, string, int64])(nil)
	_ framework.StoreUser = (*aggregate[string, string, int64])(nil)
)

// Aggregate folds each key's records into an aggregate kept in the named
// key-value store, starting from init(), and emits (key, new aggregate)
// after every record. Records on one key must reach one task: read a topic
// partitioned by the key (see GroupBy).
func Aggregate[K, V, A any](in serde.Codec[K, V], agg serde.Serde[A], storeName string, init func() A, fn func(K, V, A) (A, error)) func() framework.Processor {
	return func() framework.Processor {
		return &aggregate[K, V, A]{in: in, agg: agg, store: storeName, init: init, fn: fn}
	}
}

// Count counts records per key; the count is an int64 (serde.Int64).
func Count[K, V any](in serde.Codec[K, V], storeName string) func() framework.Processor {
	return Aggregate(in, serde.Int64(), storeName, func() int64 { return 0 },
		func(_ K, _ V, n int64) (int64, error) { return n + 1, nil })
}

// Reduce combines each key's values with fn; the first value of a key is
// kept as it is.
func Reduce[K, V any](in serde.Codec[K, V], storeName string, fn func(acc, v V) (V, error)) func() framework.Processor {
	return func() framework.Processor {
		p := &aggregate[K, V, V]{in: in, agg: in.Value, store: storeName}
		p.fn = func(_ K, v V, acc V) (V, error) { return fn(acc, v) }
		return &reduce[K, V]{p}
	}
}

func (a *aggregate[K, V, A]) UsesStores() []string { return []string{a.store} }

func (a *aggregate[K, V, A]) Init(ctx framework.Context) error {
	kv, err := ctx.KeyValueStore(a.store)
	if err != nil {
		return err
	}
	a.kv = kv
	return nil
}

func (a *aggregate[K, V, A]) Close() error { return nil }

func (a *aggregate[K, V, A]) Process(ctx framework.Context, rec framework.Record) error {
	k, v, err := decode(a.in, rec)
	if err != nil {
		return err
	}
	acc, found, err := a.current(rec.Key)
	if err != nil {
		return err
	}
	if !found && a.init != nil {
		acc = a.init()
	}
	next, err := a.fn(k, v, acc)
	if err != nil {
		return err
	}
	b, err := a.agg.Serialize(next)
	if err != nil {
		return fmt.Errorf("serialize aggregate: %w", err)
	}
	if err := a.kv.Put(rec.Key, b); err != nil {
		return err
	}
	rec.Value = b
	return ctx.Forward(rec)
}

func (a *aggregate[K, V, A]) current(key []byte) (A, bool, error) {
	var acc A
	b, ok, err := a.kv.Get(key)
	if err != nil || !ok {
		return acc, false, err
	}
	if acc, err = a.agg.Deserialize(b); err != nil {
		return acc, false, fmt.Errorf("stored aggregate of %q in %s: %w", key, a.store, err)
	}
	return acc, true, nil
}

// reduce is an aggregate whose first value per key is taken as is.
type reduce[K, V any] struct{ *aggregate[K, V, V] }

func (r *reduce[K, V]) Process(ctx framework.Context, rec framework.Record) error {
	k, v, err := decode(r.in, rec)
	if err != nil {
		return err
	}
	acc, found, err := r.current(rec.Key)
	if err != nil {
		return err
	}
	next := v
	if found {
		if next, err = r.fn(k, v, acc); err != nil {
			return err
		}
	}
	b, err := r.agg.Serialize(next)
	if err != nil {
		return fmt.Errorf("serialize aggregate: %w", err)
	}
	if err := r.kv.Put(rec.Key, b); err != nil {
		return err
	}
	rec.Value = b
	return ctx.Forward(rec)
}

// Windows says which windows a record falls in: tumbling when Advance equals
// Size, hopping when it is smaller. Grace is how long after a window ends
// (in stream time) records for it are still accepted.
type Windows struct {
	Size, Advance, Grace time.Duration
}

// Tumbling returns back-to-back windows of size.
func Tumbling(size, grace time.Duration) Windows {
	return Windows{Size: size, Advance: size, Grace: grace}
}

// Hopping returns windows of size starting every advance.
func Hopping(size, advance, grace time.Duration) Windows {
	return Windows{Size: size, Advance: advance, Grace: grace}
}

// Starts returns the starts of the windows containing ts, oldest first.
// As in Kafka Streams, windows are aligned to the Unix epoch and none
// starts before it.
func (w Windows) Starts(ts time.Time) []time.Time {
	adv := w.Advance.Nanoseconds()
	n := ts.UnixNano()
	last := n - ((n%adv)+adv)%adv // floor to a multiple of adv
	var out []time.Time
	for s := last; s > n-w.Size.Nanoseconds() && s >= 0; s -= adv {
		out = append([]time.Time{time.Unix(0, s).UTC()}, out...)
	}
	return out
}

// Windowed is the key of a windowed aggregate's output.
type Windowed[K any] struct {
	Key        K
	Start, End time.Time
}

// timestampSize is the size of one timestamp in a windowed key.
const timestampSize = 8

type windowedSerde[K any] struct {
	key  serde.Serde[K]
	size time.Duration
}

// WindowedKey serializes the keys of time windows of the given size in
// the layout of Kafka Streams' TimeWindowedSerializer, so that its
// consumers (and kcat) read them: the key's own bytes, then the window's
// start in Unix milliseconds, 8 big-endian bytes. The end is not written:
// reading takes it as start + size, as TimeWindowedDeserializer does.
func WindowedKey[K any](key serde.Serde[K], size time.Duration) serde.Serde[Windowed[K]] {
	return windowedSerde[K]{key: key, size: size}
}

// ErrShortWindowedKey is returned when a windowed key is too short to
// hold its window's timestamps.
var ErrShortWindowedKey = errors.New("windowed key shorter than its window's timestamps")

func (s windowedSerde[K]) Serialize(w Windowed[K]) ([]byte, error) {
	kb, err := s.key.Serialize(w.Key)
	if err != nil {
		return nil, err
	}
	return binary.BigEndian.AppendUint64(append(make([]byte, 0, len(kb)+timestampSize), kb...), uint64(w.Start.UnixMilli())), nil
}

// PartitionKey is the base key's bytes: a window's result goes where its
// key's records go (serde.KeyPartitioner).
func (s windowedSerde[K]) PartitionKey(b []byte) []byte { return b[:max(len(b)-timestampSize, 0)] }

func (s windowedSerde[K]) Deserialize(b []byte) (Windowed[K], error) {
	n := len(b) - timestampSize
	if n < 0 {
		return Windowed[K]{}, ErrShortWindowedKey
	}
	k, err := s.key.Deserialize(b[:n])
	if err != nil {
		return Windowed[K]{}, err
	}
	start := time.UnixMilli(int64(binary.BigEndian.Uint64(b[n:]))).UTC()
	return Windowed[K]{Key: k, Start: start, End: start.Add(s.size)}, nil
}

type sessionSerde[K any] struct{ key serde.Serde[K] }

// SessionWindowedKey serializes the keys of session windows in the layout
// of Kafka Streams' SessionWindowedSerializer: the key's own bytes, then
// the session's end and its start, each in Unix milliseconds, 8
// big-endian bytes.
func SessionWindowedKey[K any](key serde.Serde[K]) serde.Serde[Windowed[K]] {
	return sessionSerde[K]{key: key}
}

func (s sessionSerde[K]) Serialize(w Windowed[K]) ([]byte, error) {
	kb, err := s.key.Serialize(w.Key)
	if err != nil {
		return nil, err
	}
	b := binary.BigEndian.AppendUint64(append(make([]byte, 0, len(kb)+2*timestampSize), kb...), uint64(w.End.UnixMilli()))
	return binary.BigEndian.AppendUint64(b, uint64(w.Start.UnixMilli())), nil
}

// PartitionKey is the base key's bytes (serde.KeyPartitioner).
func (s sessionSerde[K]) PartitionKey(b []byte) []byte { return b[:max(len(b)-2*timestampSize, 0)] }

func (s sessionSerde[K]) Deserialize(b []byte) (Windowed[K], error) {
	n := len(b) - 2*timestampSize
	if n < 0 {
		return Windowed[K]{}, ErrShortWindowedKey
	}
	k, err := s.key.Deserialize(b[:n])
	if err != nil {
		return Windowed[K]{}, err
	}
	return Windowed[K]{
		Key:   k,
		End:   time.UnixMilli(int64(binary.BigEndian.Uint64(b[n:]))).UTC(),
		Start: time.UnixMilli(int64(binary.BigEndian.Uint64(b[n+timestampSize:]))).UTC(),
	}, nil
}

type windowed[K, V, A any] struct {
	in     serde.Codec[K, V]
	agg    serde.Serde[A]
	store  string
	w      Windows
	init   func() A
	fn     func(K, V, A) (A, error)
	ws     store.Window
	keyOut serde.Serde[Windowed[K]]
}

var _ framework.StoreUser = (*windowed[string, string, int64])(nil)

// WindowedAggregate folds each key's records into one aggregate per window,
// kept in the named window store, and emits (Windowed key, new aggregate)
// after every record. A record whose every window closed (window end plus
// grace at or before stream time) is reported as dropped ("late"). Windows
// older than their retention are removed from the store as stream time
// passes.
func WindowedAggregate[K, V, A any](in serde.Codec[K, V], agg serde.Serde[A], storeName string, w Windows, init func() A, fn func(K, V, A) (A, error)) func() framework.Processor {
	return func() framework.Processor {
		return &windowed[K, V, A]{in: in, agg: agg, store: storeName, w: w, init: init, fn: fn, keyOut: WindowedKey(in.Key, w.Size)}
	}
}

func (p *windowed[K, V, A]) UsesStores() []string { return []string{p.store} }
func (p *windowed[K, V, A]) Close() error         { return nil }

func (p *windowed[K, V, A]) Init(ctx framework.Context) error {
	if p.w.Size <= 0 || p.w.Advance <= 0 || p.w.Advance > p.w.Size || p.w.Grace < 0 {
		return fmt.Errorf("windows %+v: size and advance must be positive, advance at most size, grace not negative", p.w)
	}
	ws, err := ctx.WindowStore(p.store)
	if err != nil {
		return err
	}
	p.ws = ws
	return nil
}

func (p *windowed[K, V, A]) Process(ctx framework.Context, rec framework.Record) error {
	k, v, err := decode(p.in, rec)
	if err != nil {
		return err
	}
	now := ctx.StreamTime()
	emitted := false
	for _, start := range p.w.Starts(rec.Timestamp) {
		end := start.Add(p.w.Size)
		if !end.Add(p.w.Grace).After(now) {
			continue // closed
		}
		acc := p.init()
		if b, ok, err := p.ws.Get(rec.Key, start); err != nil {
			return err
		} else if ok {
			if acc, err = p.agg.Deserialize(b); err != nil {
				return fmt.Errorf("stored aggregate in %s: %w", p.store, err)
			}
		}
		if acc, err = p.fn(k, v, acc); err != nil {
			return err
		}
		b, err := p.agg.Serialize(acc)
		if err != nil {
			return fmt.Errorf("serialize aggregate: %w", err)
		}
		if err := p.ws.Put(rec.Key, start, b); err != nil {
			return err
		}
		out := rec
		if out.Key, err = p.keyOut.Serialize(Windowed[K]{Key: k, Start: start, End: end}); err != nil {
			return err
		}
		out.PartitionKey = rec.Key // the base key: WindowedStreamPartitioner's placement
		out.Value = b
		if err := ctx.Forward(out); err != nil {
			return err
		}
		emitted = true
	}
	if !emitted {
		ctx.Report(framework.DropEvent{Reason: "late", Record: rec,
			Detail: fmt.Sprintf("every window of %s closed at stream time %s", rec.Timestamp.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))})
	}
	return p.ws.DropBefore(now.Add(-p.w.Size - p.w.Grace))
}

type tableJoin[K, V, T, R any] struct {
	stream serde.Codec[K, V]
	table  serde.Codec[K, T]
	out    serde.Serde[R]
	tableT string
	store  string
	left   bool
	joiner func(K, V, T, bool) (R, error)
	kv     store.KeyValue
}

var _ framework.StoreUser = (*tableJoin[string, string, string, string])(nil)

// Join describes a stream-table join.
type Join[K, V, T, R any] struct {
	// Stream and Table are the codecs of the two inputs; the keys must agree.
	Stream serde.Codec[K, V]
	Table  serde.Codec[K, T]
	// TableTopic is the input that carries table updates (a compacted
	// topic; a nil value deletes the key). The processor's other input is
	// the stream.
	TableTopic string
	// Store is the key-value store that materialises the table.
	Store string
	// Out serializes what Joiner returns.
	Out serde.Serde[R]
	// Left keeps stream records with no table row: Joiner is called with
	// found false. Otherwise they are reported as dropped ("no-match").
	Left bool
	// Joiner combines a stream record with the table's current row.
	Joiner func(key K, v V, row T, found bool) (R, error)
}

// StreamTableJoin joins each stream record with the table's row for its key
// at the time the record is delivered. Stream and table topics must be
// co-partitioned. Because the causal gate holds a stream record back until
// the table updates it depends on are applied, a record produced after an
// update (in a causal session) always sees it.
func StreamTableJoin[K, V, T, R any](j Join[K, V, T, R]) func() framework.Processor {
	return func() framework.Processor {
		return &tableJoin[K, V, T, R]{stream: j.Stream, table: j.Table, out: j.Out, tableT: j.TableTopic, store: j.Store, left: j.Left, joiner: j.Joiner}
	}
}

func (j *tableJoin[K, V, T, R]) UsesStores() []string { return []string{j.store} }
func (j *tableJoin[K, V, T, R]) Close() error         { return nil }

func (j *tableJoin[K, V, T, R]) Init(ctx framework.Context) error {
	kv, err := ctx.KeyValueStore(j.store)
	if err != nil {
		return err
	}
	j.kv = kv
	return nil
}

func (j *tableJoin[K, V, T, R]) Process(ctx framework.Context, rec framework.Record) error {
	if rec.Topic == j.tableT {
		if _, err := j.table.Key.Deserialize(rec.Key); err != nil {
			return framework.KeyError(rec, err)
		}
		if rec.Value == nil {
			return j.kv.Delete(rec.Key)
		}
		if _, err := j.table.Value.Deserialize(rec.Value); err != nil {
			return framework.ValueError(rec, err)
		}
		return j.kv.Put(rec.Key, rec.Value)
	}
	k, v, err := decode(j.stream, rec)
	if err != nil {
		return err
	}
	var row T
	b, found, err := j.kv.Get(rec.Key)
	if err != nil {
		return err
	}
	if found {
		if row, err = j.table.Value.Deserialize(b); err != nil {
			return fmt.Errorf("stored row of %q in %s: %w", rec.Key, j.store, err)
		}
	} else if !j.left {
		ctx.Report(framework.DropEvent{Reason: "no-match", Record: rec, Detail: "no table row for key"})
		return nil
	}
	r, err := j.joiner(k, v, row, found)
	if err != nil {
		return err
	}
	if rec.Value, err = j.out.Serialize(r); err != nil {
		return fmt.Errorf("serialize join result: %w", err)
	}
	return ctx.Forward(rec)
}
