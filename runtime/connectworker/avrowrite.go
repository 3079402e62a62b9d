//go:build cgo

package connectworker

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/hamba/avro/v2"

	"github.com/causeway-stream/causeway/connect"
)

// mockRegistries are the registries of mock:// URLs, one per URL in the
// process, as Confluent's converters share a mock registry per scope: a
// source and a sink in one worker given the same mock URL see one
// registry.
var mockRegistries sync.Map // URL -> schemaregistry.Client

// registryClient is the client of the Schema Registry at url.
func registryClient(url string) (schemaregistry.Client, error) {
	if strings.HasPrefix(url, "mock://") {
		if c, ok := mockRegistries.Load(url); ok {
			return c.(schemaregistry.Client), nil
		}
	}
	c, err := schemaregistry.NewClient(schemaregistry.NewConfig(url))
	if err != nil {
		return nil, fmt.Errorf("schema.registry.url: %w", err)
	}
	if strings.HasPrefix(url, "mock://") {
		actual, _ := mockRegistries.LoadOrStore(url, c)
		c = actual.(schemaregistry.Client)
	}
	return c, nil
}

// avroWriter writes a source's keys or values as Confluent's
// AvroConverter does: the record's Connect schema made an Avro schema
// (avroSchemaOf), registered under the topic's subject (<topic>-key or
// <topic>-value), and the data in the registry's wire format: a zero
// byte, the schema's id in four bytes, the Avro binary.
type avroWriter struct {
	client schemaregistry.Client
	suffix string
	// plans are what each topic's schemas are written with, by the
	// Connect schema (a source makes its schemas once), and by the Avro
	// schema's text for schemas made anew for each record.
	plans  map[writeKey]*writePlan
	byText map[string]*writePlan
}

type writeKey struct {
	topic  string
	schema *connect.Schema
}

// writePlan is how data of one Connect schema goes to one topic.
type writePlan struct {
	schema avro.Schema
	// api encodes with caches of its own: hamba/avro's shared ones mix
	// up two records of one name (a table's Value before and after its
	// columns changed), encoding one with the other's fields.
	api avro.API
	// prefix is the wire format's zero byte and the schema's id.
	prefix [5]byte
}

// newAvroWriter writes to the registry at url, keys when key is set.
func newAvroWriter(url string, key bool) (*avroWriter, error) {
	client, err := registryClient(url)
	if err != nil {
		return nil, err
	}
	suffix := "-value"
	if key {
		suffix = "-key"
	}
	return &avroWriter{client: client, suffix: suffix, plans: map[writeKey]*writePlan{}, byText: map[string]*writePlan{}}, nil
}

// write is data, of schema, in Avro for topic; null stays null.
func (a *avroWriter) write(topic string, data []byte, schema *connect.Schema) ([]byte, error) {
	if data == nil {
		return nil, nil
	}
	if schema == nil {
		return nil, errors.New("AvroConverter: the record has no schema, and Avro needs one")
	}
	plan, err := a.plan(topic, schema)
	if err != nil {
		return nil, fmt.Errorf("AvroConverter: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("AvroConverter: the source's data: %w", err)
	}
	gv, err := avroValueOf(v, schema, plan.schema, "")
	if err != nil {
		return nil, fmt.Errorf("AvroConverter: %w", err)
	}
	b, err := plan.api.Marshal(plan.schema, gv)
	if err != nil {
		return nil, fmt.Errorf("AvroConverter: %w", err)
	}
	return append(plan.prefix[:], b...), nil
}

// plan finds the plan of schema for topic, registering the schema the
// first time.
func (a *avroWriter) plan(topic string, schema *connect.Schema) (*writePlan, error) {
	k := writeKey{topic, schema}
	if p, ok := a.plans[k]; ok {
		return p, nil
	}
	text, err := avroSchemaOf(schema)
	if err != nil {
		return nil, err
	}
	subject := topic + a.suffix
	p, ok := a.byText[subject+"\x00"+text]
	if !ok {
		parsed, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
		if err != nil {
			return nil, fmt.Errorf("the Avro schema made of the record's: %w", err)
		}
		id, err := a.client.Register(subject, schemaregistry.SchemaInfo{Schema: text}, false)
		if err != nil {
			return nil, fmt.Errorf("register the schema under %s: %w", subject, err)
		}
		p = &writePlan{schema: parsed, api: avro.Config{}.Freeze()}
		binary.BigEndian.PutUint32(p.prefix[1:], uint32(id))
		if len(a.byText) >= 1000 {
			clear(a.byText) // transforms that make a schema a record
		}
		a.byText[subject+"\x00"+text] = p
	}
	if len(a.plans) >= 1000 {
		clear(a.plans)
	}
	a.plans[k] = p
	return p, nil
}
