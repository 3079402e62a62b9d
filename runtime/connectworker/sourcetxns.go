package connectworker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/convert"
	"github.com/causeway-stream/causeway/connect/transform"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// pendingEnd is the end record of a source transaction, kept in the
// offsets topic between the commit of the transaction's other records
// and its own.
type pendingEnd struct {
	Topic     string             `json:"topic"`
	Key       []byte             `json:"key,omitempty"`
	Value     []byte             `json:"value,omitempty"`
	Headers   []framework.Header `json:"headers,omitempty"`
	Timestamp time.Time          `json:"timestamp"`
}

// pendingBudget bounds the bytes the ends one offset record keeps take
// in it (pendingSize), far under the offsets topic's largest record (1 MB
// by default): a poll of many source transactions, whose ends would not
// fit, is written a run of whole transactions at a time, each run's ends
// kept beside its offset. Each run costs two Kafka transactions, so the
// budget is no smaller than it must be: a poll of the capture bench's
// shop workload (2,048 records, JSON schemas on) fits one run.
const pendingBudget = 700 << 10

// pendingSize is about what the end r takes in an offset record, as a
// pendingEnd in JSON: its bytes in base64, and its field names, quotes and
// time.
func pendingSize(r routedRecord) int {
	size := len(r.t.Key) + len(r.t.Value) + len(r.src.Transaction)
	names := len(r.t.Topic) + len(connect.TxnEndHeader)
	for _, h := range r.t.Headers {
		size += len(h.Value)
		names += len(h.Key) + 24
	}
	return size*4/3 + names + 128
}

// writeTxns writes the records of whole source transactions, a run of
// transactions whose ends fit pendingBudget at a time (writeRunOfTxns).
func (s *sourceRunner) writeTxns(ctx context.Context, recs []routedRecord) error {
	for len(recs) > 0 {
		n, size := 0, 0
		for n < len(recs) && size < pendingBudget {
			if r := recs[n]; r.src.EndsTransaction {
				size += pendingSize(r)
			}
			n++
		}
		if err := s.writeRunOfTxns(ctx, recs[:n]); err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}

// writeRunOfTxns writes the records of whole source transactions in two Kafka
// transactions. The first holds every record but the ends, each stamped
// with the session's clock (what the source wrote before), those of a
// transaction that has an end marked with its id (connect.TxnHeader), and
// the offset, with the ends kept beside it. Once it is committed and
// claimed, the second writes the ends to partition 0 of their topics,
// stamped with a clock that claims every record of the first: a reader
// with the gate receives an end only after its transaction's records, on
// whatever topics and partitions they lie, and the ends of one topic in
// the order written. The offset is committed with the first, so a task
// that dies between the two writes the ends when it starts again.
func (s *sourceRunner) writeRunOfTxns(ctx context.Context, recs []routedRecord) error {
	ended := map[string]bool{}
	var ends []pendingEnd
	offset := s.offset
	data := make([]routedRecord, 0, len(recs))
	for _, r := range recs {
		if r.src.Offset != nil {
			offset = r.src.Offset
		}
		if r.src.EndsTransaction {
			ended[r.src.Transaction] = true
			ends = append(ends, pendingEnd{Topic: r.t.Topic, Key: r.t.Key, Value: r.t.Value, Timestamp: r.src.Timestamp,
				Headers: append(r.t.Headers, framework.Header{Key: connect.TxnEndHeader, Value: []byte(r.src.Transaction)})})
			continue
		}
		data = append(data, r)
	}
	topics := s.topics
	for _, r := range data {
		topics = addTopic(topics, r.t.Topic)
		if err := s.out.ensureTopic(ctx, r.t.Topic); err != nil {
			return err
		}
	}
	committed, err := s.out.write(ctx, &s.session, func(tx *sourceTxn) error {
		for _, r := range data {
			h := r.t.Headers
			if ended[r.src.Transaction] {
				h = append(h, framework.Header{Key: connect.TxnHeader, Value: []byte(r.src.Transaction)})
			}
			if _, err := tx.record(r.t.Topic, r.t.Key, r.t.Value, r.src.Timestamp, h); err != nil {
				return err
			}
		}
		return s.offsetRecord(tx, committedOffset{Offset: offset, Topics: topics, Pending: ends})
	})
	if committed {
		s.offset, s.topics = offset, topics
		s.produced.Add(int64(len(data)))
	}
	if err != nil {
		return err
	}
	if err := s.committed(ctx); err != nil {
		return err
	}
	return s.writeEnds(ctx, ends)
}

// writeEnds writes the ends of transactions already committed, with the
// offset that keeps them no longer.
func (s *sourceRunner) writeEnds(ctx context.Context, ends []pendingEnd) error {
	if len(ends) == 0 {
		return nil
	}
	topics := s.topics
	for _, e := range ends {
		topics = addTopic(topics, e.Topic)
		if err := s.out.ensureTopic(ctx, e.Topic); err != nil {
			return err
		}
	}
	committed, err := s.out.write(ctx, &s.session, func(tx *sourceTxn) error {
		for _, e := range ends {
			if _, err := tx.record(e.Topic, e.Key, e.Value, e.Timestamp, e.Headers); err != nil {
				return err
			}
		}
		return s.offsetRecord(tx, committedOffset{Offset: s.offset, Topics: topics})
	})
	if committed {
		s.topics = topics
		s.produced.Add(int64(len(ends)))
	}
	return err
}

// offsetRecord writes the source's offset record into tx.
func (s *sourceRunner) offsetRecord(tx *sourceTxn, off committedOffset) error {
	b, err := json.Marshal(off)
	if err != nil {
		return err
	}
	m := transport.Message{Topic: s.offsets.Topic, Partition: s.offsets.Partition, Key: []byte(s.connector), Value: b, Timestamp: time.Now()}
	if err := tx.raw(&m); err != nil {
		return fmt.Errorf("offset: %w", err)
	}
	return nil
}

func addTopic(topics []string, topic string) []string {
	for _, t := range topics {
		if t == topic {
			return topics
		}
	}
	return append(append([]string(nil), topics...), topic)
}

// sourceEnvelope is how a source connector's keys and values are written,
// as its converters say: with no converter, or the JsonConverter with
// schemas.enable=false, the data as the source gave it; with the
// JsonConverter's schemas on, a {"schema", "payload"} envelope of the
// record's schema (null when it has none) and the data; with the
// AvroConverter, Avro in the Schema Registry's wire format.
type sourceEnvelope struct {
	keys, values bool
	// schemas caches each schema's JSON.
	schemas map[*connect.Schema][]byte
	// keyAvro and valueAvro write Avro, when the converter is Avro's.
	keyAvro, valueAvro *avroWriter
}

func sourceEnvelopeOf(cfg map[string]string) (sourceEnvelope, error) {
	on := func(prefix string) bool {
		class, ok := cfg[prefix]
		return ok && class == convert.JSON && cfg[prefix+"."+convert.SchemasEnable] != "false"
	}
	e := sourceEnvelope{keys: on(keyKeyConverter), values: on(keyValueConverter), schemas: map[*connect.Schema][]byte{}}
	var err error
	if cfg[keyKeyConverter] == convert.Avro {
		if e.keyAvro, err = newAvroWriter(cfg[keyKeyConverter+".schema.registry.url"], true); err != nil {
			return e, fmt.Errorf("%s: %w", keyKeyConverter, err)
		}
	}
	if cfg[keyValueConverter] == convert.Avro {
		if e.valueAvro, err = newAvroWriter(cfg[keyValueConverter+".schema.registry.url"], false); err != nil {
			return e, fmt.Errorf("%s: %w", keyValueConverter, err)
		}
	}
	return e, nil
}

// write is t's key and value as they are written to Kafka.
func (e sourceEnvelope) write(t transform.Record) (key, value []byte, err error) {
	switch {
	case e.keyAvro != nil:
		if key, err = e.keyAvro.write(t.Topic, t.Key, t.KeySchema); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", keyKeyConverter, err)
		}
	case e.keys && t.Key != nil:
		key = e.wrap(t.Key, t.KeySchema)
	default:
		key = t.Key
	}
	switch {
	case e.valueAvro != nil:
		if value, err = e.valueAvro.write(t.Topic, t.Value, t.ValueSchema); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", keyValueConverter, err)
		}
	case e.values && t.Value != nil:
		value = e.wrap(t.Value, t.ValueSchema)
	default:
		value = t.Value
	}
	return key, value, nil
}

func (e sourceEnvelope) wrap(data []byte, schema *connect.Schema) []byte {
	js := []byte("null")
	if schema != nil {
		if js = e.schemas[schema]; js == nil {
			js, _ = json.Marshal(schema)
			if len(e.schemas) >= 1000 {
				// Transforms that make a schema a record: kept no longer.
				clear(e.schemas)
			}
			e.schemas[schema] = js
		}
	}
	out := make([]byte, 0, len(js)+len(data)+24)
	out = append(append(append(out, `{"schema":`...), js...), `,"payload":`...)
	return append(append(out, data...), '}')
}
