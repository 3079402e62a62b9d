//go:build cgo

package connectworker

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/framework/serde/registry"
)

// avroConverter is Confluent's Avro converter over the Schema Registry at
// url.
func avroConverter(url string, key bool) (avroToJSON, error) {
	client, err := schemaregistry.NewClient(schemaregistry.NewConfig(url))
	if err != nil {
		return avroToJSON{}, fmt.Errorf("schema.registry.url: %w", err)
	}
	return newAvroToJSON(client, key), nil
}

// avroToJSON reads data in the Schema Registry's Avro wire format, with
// the writer's schema from the registry, and writes it as JSON (without a
// Connect schema).
type avroToJSON struct {
	client schemaregistry.Client
	part   registry.Part
	mu     *sync.Mutex
	serdes map[string]serde.Serde[map[string]any]
}

func newAvroToJSON(client schemaregistry.Client, key bool) avroToJSON {
	part := registry.Value
	if key {
		part = registry.Key
	}
	return avroToJSON{client: client, part: part, mu: &sync.Mutex{}, serdes: map[string]serde.Serde[map[string]any]{}}
}

// Read implements convert.Converter.
func (a avroToJSON) Read(topic string, data []byte) ([]byte, *connect.Schema, error) {
	a.mu.Lock()
	s, ok := a.serdes[topic]
	if !ok {
		var err error
		if s, err = registry.Avro[map[string]any](a.client, topic, a.part, registry.Options{}); err != nil {
			a.mu.Unlock()
			return nil, nil, err
		}
		a.serdes[topic] = s
	}
	a.mu.Unlock()
	v, err := s.Deserialize(data)
	if err != nil {
		return nil, nil, fmt.Errorf("AvroConverter: %w", err)
	}
	b, err := json.Marshal(v)
	return b, nil, err
}
