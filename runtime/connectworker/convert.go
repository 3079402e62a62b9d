//go:build cgo

package connectworker

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"

	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/framework/serde/registry"
)

// converter turns a record's value into the JSON object a sink writes.
type converter func(topic string, value []byte) ([]byte, error)

// converterFor is the value converter cfg names; nil for JSON, which
// needs none.
func converterFor(cfg map[string]string) (converter, error) {
	if cfg[keyValueConverter] != AvroConverter {
		return nil, nil
	}
	client, err := schemaregistry.NewClient(schemaregistry.NewConfig(cfg[keyValueConverter+".schema.registry.url"]))
	if err != nil {
		return nil, fmt.Errorf("%s.schema.registry.url: %w", keyValueConverter, err)
	}
	return avroToJSON(client), nil
}

// avroToJSON reads values in the Schema Registry's Avro wire format, with
// the writer's schema from the registry, and writes them as JSON.
func avroToJSON(client schemaregistry.Client) converter {
	var mu sync.Mutex
	serdes := map[string]serde.Serde[map[string]any]{}
	return func(topic string, value []byte) ([]byte, error) {
		mu.Lock()
		s, ok := serdes[topic]
		if !ok {
			var err error
			if s, err = registry.Avro[map[string]any](client, topic, registry.Value, registry.Options{}); err != nil {
				mu.Unlock()
				return nil, err
			}
			serdes[topic] = s
		}
		mu.Unlock()
		v, err := s.Deserialize(value)
		if err != nil {
			return nil, fmt.Errorf("value converter: %w", err)
		}
		return json.Marshal(v)
	}
}
