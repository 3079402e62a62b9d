//go:build cgo

package connectworker

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/framework/serde/registry"
)

// avroConverter is Confluent's Avro converter over the Schema Registry at
// url.
func avroConverter(url string, key bool) (avroToJSON, error) {
	client, err := registryClient(url)
	if err != nil {
		return avroToJSON{}, err
	}
	return newAvroToJSON(client, key), nil
}

// avroToJSON reads data in the Schema Registry's Avro wire format, with
// the writer's schema from the registry, and hands it on in Kafka
// Connect's JSON form with the Connect schema of the writer's schema, as
// Confluent's AvroConverter does.
type avroToJSON struct {
	client schemaregistry.Client
	part   registry.Part
	mu     *sync.Mutex
	// plans by the writer schema's id.
	plans map[int]*avroPlan
}

func newAvroToJSON(client schemaregistry.Client, key bool) avroToJSON {
	part := registry.Value
	if key {
		part = registry.Key
	}
	return avroToJSON{client: client, part: part, mu: &sync.Mutex{}, plans: map[int]*avroPlan{}}
}

// Read implements convert.Converter.
func (a avroToJSON) Read(topic string, data []byte) ([]byte, *connect.Schema, error) {
	plan, err := a.prepare(topic, data)
	if err != nil {
		return nil, nil, fmt.Errorf("AvroConverter: %w", err)
	}
	var v any
	if err := plan.api.Unmarshal(plan.schema, data[5:], &v); err != nil {
		return nil, nil, fmt.Errorf("AvroConverter: %w", err)
	}
	b, err := json.Marshal(toConnect(v, plan.schema))
	return b, plan.connect, err
}

// prepare finds the plan of data's writer schema, reading it from the
// registry the first time.
func (a avroToJSON) prepare(topic string, data []byte) (*avroPlan, error) {
	if len(data) < 5 || data[0] != 0 {
		return nil, errors.New("not in the Schema Registry's wire format (a zero byte, then the schema's id)")
	}
	id := int(binary.BigEndian.Uint32(data[1:5]))
	a.mu.Lock()
	defer a.mu.Unlock()
	plan, ok := a.plans[id]
	if !ok {
		subject := topic + "-value"
		if a.part == registry.Key {
			subject = topic + "-key"
		}
		info, err := a.client.GetBySubjectAndID(subject, id)
		if err != nil {
			return nil, fmt.Errorf("schema %d of %s: %w", id, subject, err)
		}
		if plan, err = newAvroPlan(info.Schema); err != nil {
			return nil, err
		}
		a.plans[id] = plan
	}
	return plan, nil
}
