// Package operators holds the processors an experienced Kafka Streams user
// reaches for: map, filter, flatMap, branch, merge, peek, selectKey and
// groupBy, count, reduce, aggregate, windowed aggregation and a stream-table
// join. Each is an ordinary framework.Processor built on the public API, so
// it runs behind the causal gate like user code.
//
// Every operator returns a constructor to give to framework.Builder.Processor.
// Records an operator emits carry the headers of the record that caused them
// (the framework replaces the clock header with a fresh stamp) and its
// timestamp. Keys and values the operator cannot decode are returned as
// errors matching framework.ErrDeserialize, so the topology's bad-input
// policy applies; an operator decodes before it changes any state.
package operators

import (
	"fmt"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/serde"
)

// Codec pairs the serdes of a record's key and value.
//
// Deprecated: use serde.Codec, of which it is another name, so that a
// topology built with the DSL needs no import of operators for it.
type Codec[K, V any] = serde.Codec[K, V]

// decode reads rec's key and value with c, naming the record on failure.
func decode[K, V any](c serde.Codec[K, V], rec framework.Record) (K, V, error) {
	var v V
	k, err := c.Key.Deserialize(rec.Key)
	if err != nil {
		return k, v, framework.KeyError(rec, err)
	}
	if v, err = c.Value.Deserialize(rec.Value); err != nil {
		return k, v, framework.ValueError(rec, err)
	}
	return k, v, nil
}

// encode returns rec with key and value replaced by k and v, written
// with c.
func encode[K, V any](c serde.Codec[K, V], rec framework.Record, k K, v V) (framework.Record, error) {
	kb, err := c.Key.Serialize(k)
	if err != nil {
		return rec, fmt.Errorf("serialize key: %w", err)
	}
	vb, err := c.Value.Serialize(v)
	if err != nil {
		return rec, fmt.Errorf("serialize value: %w", err)
	}
	rec.Key, rec.Value = kb, vb
	return rec, nil
}

// KV is one key and value, for operators that emit several.
type KV[K, V any] struct {
	Key   K
	Value V
}

// Map turns each record into one new record.
func Map[K, V, K2, V2 any](in serde.Codec[K, V], out serde.Codec[K2, V2], fn func(K, V) (K2, V2, error)) func() framework.Processor {
	return func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			k, v, err := decode(in, rec)
			if err != nil {
				return err
			}
			k2, v2, err := fn(k, v)
			if err != nil {
				return err
			}
			o, err := encode(out, rec, k2, v2)
			if err != nil {
				return err
			}
			return ctx.Forward(o)
		})
	}
}

// MapValues turns each value into a new one and keeps the key bytes as they
// are, so the record stays on its partition.
func MapValues[K, V, V2 any](in serde.Codec[K, V], out serde.Serde[V2], fn func(K, V) (V2, error)) func() framework.Processor {
	return func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			k, v, err := decode(in, rec)
			if err != nil {
				return err
			}
			v2, err := fn(k, v)
			if err != nil {
				return err
			}
			if rec.Value, err = out.Serialize(v2); err != nil {
				return fmt.Errorf("serialize value: %w", err)
			}
			return ctx.Forward(rec)
		})
	}
}

// Filter forwards the records for which keep returns true, unchanged.
func Filter[K, V any](in serde.Codec[K, V], keep func(K, V) bool) func() framework.Processor {
	return func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			k, v, err := decode(in, rec)
			if err != nil {
				return err
			}
			if !keep(k, v) {
				return nil
			}
			return ctx.Forward(rec)
		})
	}
}

// FlatMap turns each record into any number of records.
func FlatMap[K, V, K2, V2 any](in serde.Codec[K, V], out serde.Codec[K2, V2], fn func(K, V) ([]KV[K2, V2], error)) func() framework.Processor {
	return func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			k, v, err := decode(in, rec)
			if err != nil {
				return err
			}
			kvs, err := fn(k, v)
			if err != nil {
				return err
			}
			for _, kv := range kvs {
				o, err := encode(out, rec, kv.Key, kv.Value)
				if err != nil {
					return err
				}
				if err := ctx.Forward(o); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// Peek calls fn for each record and forwards it unchanged.
func Peek[K, V any](in serde.Codec[K, V], fn func(K, V)) func() framework.Processor {
	return func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			k, v, err := decode(in, rec)
			if err != nil {
				return err
			}
			fn(k, v)
			return ctx.Forward(rec)
		})
	}
}

// Merge forwards every record of every input unchanged: give it several
// inputs to merge streams.
func Merge() func() framework.Processor {
	return func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			return ctx.Forward(rec)
		})
	}
}

// SelectKey gives each record a new key and keeps the value bytes. Sent to a
// topic partitioned by the new key (an internal repartition topic), it is
// Kafka Streams' groupBy: the processor reading that topic sees every record
// of a key on one task.
func SelectKey[K, V, K2 any](in serde.Codec[K, V], key serde.Serde[K2], fn func(K, V) (K2, error)) func() framework.Processor {
	return func() framework.Processor {
		return framework.ProcessorFunc(func(ctx framework.Context, rec framework.Record) error {
			k, v, err := decode(in, rec)
			if err != nil {
				return err
			}
			k2, err := fn(k, v)
			if err != nil {
				return err
			}
			if rec.Key, err = key.Serialize(k2); err != nil {
				return fmt.Errorf("serialize key: %w", err)
			}
			return ctx.Forward(rec)
		})
	}
}

// GroupBy is SelectKey under the name Kafka Streams users look for. Wire its
// output to a topic declared framework.Internal(), and the aggregation after
// it to that topic.
func GroupBy[K, V, K2 any](in serde.Codec[K, V], key serde.Serde[K2], fn func(K, V) (K2, error)) func() framework.Processor {
	return SelectKey(in, key, fn)
}

// Case is one branch: records for which Match returns true go to Output.
type Case[K, V any] struct {
	Output string
	Match  func(K, V) bool
}

type branch[K, V any] struct {
	in    serde.Codec[K, V]
	cases []Case[K, V]
}

// Branch sends each record to the output of the first case that matches.
// A record no case matches is reported as dropped ("unmatched"); add a last
// case that matches everything to keep them.
func Branch[K, V any](in serde.Codec[K, V], cases ...Case[K, V]) func() framework.Processor {
	return func() framework.Processor { return &branch[K, V]{in: in, cases: cases} }
}

var (
	_ framework.Processor  = (*branch[string, string])(nil)
	_ framework.OutputUser = (*branch[string, string])(nil)
)

func (b *branch[K, V]) Init(framework.Context) error { return nil }
func (b *branch[K, V]) Close() error                 { return nil }

// UsesOutputs lets Build check every case's output is declared.
func (b *branch[K, V]) UsesOutputs() []string {
	out := make([]string, len(b.cases))
	for i, c := range b.cases {
		out[i] = c.Output
	}
	return out
}

func (b *branch[K, V]) Process(ctx framework.Context, rec framework.Record) error {
	k, v, err := decode(b.in, rec)
	if err != nil {
		return err
	}
	for _, c := range b.cases {
		if c.Match(k, v) {
			return ctx.Emit(c.Output, rec)
		}
	}
	ctx.Report(framework.DropEvent{Reason: "unmatched", Record: rec, Detail: "no branch matched"})
	return nil
}
