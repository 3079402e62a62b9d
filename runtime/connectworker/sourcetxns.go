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

// pendingEnd is the end record of a source transaction as a worker of
// an earlier version kept it in the offsets topic, between the commit of
// the transaction's other records and its own: the next task writes it
// first (writeEnds).
type pendingEnd struct {
	Topic     string             `json:"topic"`
	Key       []byte             `json:"key,omitempty"`
	Value     []byte             `json:"value,omitempty"`
	Headers   []framework.Header `json:"headers,omitempty"`
	Timestamp time.Time          `json:"timestamp"`
}

// writeTxns writes the records of whole source transactions, with the
// offset, in one Kafka transaction. First every record but the ends, each
// stamped with the session's clock (what the source wrote before), those
// of a transaction that has an end marked with its id (connect.TxnHeader).
// Once they have reached the broker the session claims them (settle), and
// then the ends follow, stamped with a clock that claims every record
// before them: a reader with the gate receives an end only after its
// transaction's records, on whatever topics and partitions they lie, and
// the ends of one topic in the order written. One Kafka transaction holds
// the records, the ends and the offset, so a task that dies at any point
// leaves them all committed or none. The offset goes first: the client
// adds the partitions a transaction writes to it before it sends there,
// and those of the first records go in one request, whereas a record
// written last to a partition of its own waits for a request of its own
// just before the commit.
func (s *sourceRunner) writeTxns(ctx context.Context, recs []routedRecord) error {
	ended := map[string]bool{}
	offset := s.offset
	data := make([]routedRecord, 0, len(recs))
	var ends []routedRecord
	topics := s.topics
	for _, r := range recs {
		if r.src.Offset != nil {
			offset = r.src.Offset
		}
		topics = addTopic(topics, r.t.Topic)
		if err := s.out.ensureTopic(ctx, r.t.Topic); err != nil {
			return err
		}
		if r.src.EndsTransaction {
			ended[r.src.Transaction] = true
			ends = append(ends, r)
			continue
		}
		data = append(data, r)
	}
	committed, err := s.out.write(ctx, &s.session, func(tx *sourceTxn) error {
		if err := s.offsetRecord(tx, committedOffset{Offset: offset, Topics: topics}); err != nil {
			return err
		}
		// The id's bytes, made once for the records of one transaction,
		// which come together; no client changes a header's value.
		var id string
		var idBytes []byte
		for _, r := range data {
			var err error
			if ended[r.src.Transaction] {
				if r.src.Transaction != id {
					id, idBytes = r.src.Transaction, []byte(r.src.Transaction)
				}
				_, err = tx.record(r.t.Topic, r.t.Key, r.t.Value, r.src.Timestamp, r.t.Headers,
					framework.Header{Key: connect.TxnHeader, Value: idBytes})
			} else {
				_, err = tx.record(r.t.Topic, r.t.Key, r.t.Value, r.src.Timestamp, r.t.Headers)
			}
			if err != nil {
				return err
			}
		}
		if len(ends) > 0 && len(data) > 0 {
			if err := tx.settle(ctx); err != nil {
				return err
			}
		}
		for _, r := range ends {
			if _, err := tx.record(r.t.Topic, r.t.Key, r.t.Value, r.src.Timestamp, r.t.Headers,
				framework.Header{Key: connect.TxnEndHeader, Value: []byte(r.src.Transaction)}); err != nil {
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

// writeEnds writes ends an earlier worker left in the offset record, with
// the offset, which keeps them no longer.
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
