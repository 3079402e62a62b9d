//go:build cgo

// Package registry makes serdes that write records in the Confluent Schema
// Registry wire format (a magic byte, the schema id, then the payload), in
// Avro, Protobuf or JSON Schema, through confluent-kafka-go's own
// schemaregistry serializers: what most Kafka shops' producers and
// consumers already read and write.
//
// confluent-kafka-go's serde package uses its kafka package, which needs
// cgo, so this package builds only with cgo: a binary built with
// CGO_ENABLED=0 has the worker and every other serde, but not these.
//
// A Schema Registry serde writes for one subject, so each is made for a
// topic and a part (key or value), under the registry's topic name
// strategy ("<topic>-key", "<topic>-value"). By default the serializer
// registers its schema when the subject does not have it yet (Confluent's
// auto.register.schemas); see Options.
//
// Tests use the registry's mock client:
//
//	client, _ := schemaregistry.NewClient(schemaregistry.NewConfig("mock://"))
package registry

import (
	"fmt"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	crserde "github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/avrov2"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/jsonschema"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/protobuf"
	"google.golang.org/protobuf/proto"

	"github.com/causeway-stream/causeway/framework/serde"
)

// Part says which part of a record a serde is for.
type Part int

const (
	// Value serdes write under the subject "<topic>-value".
	Value Part = iota
	// Key serdes write under the subject "<topic>-key".
	Key
)

func (p Part) serdeType() crserde.Type {
	if p == Key {
		return crserde.KeySerde
	}
	return crserde.ValueSerde
}

// Options are the choices a registry serde leaves open.
type Options struct {
	// UseLatest writes with the subject's latest registered schema instead
	// of registering the type's own: for subjects whose schemas are managed
	// outside the application. Default: off (the type's schema is
	// registered when missing).
	UseLatest bool
}

// codec is a serde of T over a serializer and a deserializer bound to one
// topic.
type codec[T any] struct {
	topic string
	ser   func(topic string, v any) ([]byte, error)
	into  func(topic string, b []byte, v any) error
	// fresh returns a new T to decode into, for types (Protobuf messages)
	// whose zero value is a nil pointer.
	fresh func() T
	// byPointer: the serializer takes a pointer to the value (Avro).
	byPointer bool
}

func (c codec[T]) message(v T) any {
	if c.byPointer {
		return &v
	}
	return v
}

func (c codec[T]) Serialize(v T) ([]byte, error) {
	b, err := c.ser(c.topic, c.message(v))
	if err != nil {
		return nil, fmt.Errorf("registry: serialize for %s: %w", c.topic, err)
	}
	return b, nil
}

func (c codec[T]) Deserialize(b []byte) (T, error) {
	v := c.fresh()
	if err := c.into(c.topic, b, &v); err != nil {
		var zero T
		return zero, fmt.Errorf("registry: deserialize from %s: %w", c.topic, err)
	}
	return v, nil
}

// protoCodec is codec for Protobuf messages, which decode into the message
// itself, not a pointer to it.
type protoCodec[T proto.Message] struct{ codec[T] }

func (c protoCodec[T]) Deserialize(b []byte) (T, error) {
	v := c.fresh()
	if err := c.into(c.topic, b, v); err != nil {
		var zero T
		return zero, fmt.Errorf("registry: deserialize from %s: %w", c.topic, err)
	}
	return v, nil
}

func zero[T any]() T {
	var v T
	return v
}

// Avro returns a serde of T in Avro, its schema derived from T by hamba/avro
// (struct fields named by their `avro` tags), for the given part of
// topic's records.
func Avro[T any](client schemaregistry.Client, topic string, part Part, opts Options) (serde.Serde[T], error) {
	sc := avrov2.NewSerializerConfig()
	sc.AutoRegisterSchemas, sc.UseLatestVersion = !opts.UseLatest, opts.UseLatest
	ser, err := avrov2.NewSerializer(client, part.serdeType(), sc)
	if err != nil {
		return nil, fmt.Errorf("registry: avro serializer: %w", err)
	}
	de, err := avrov2.NewDeserializer(client, part.serdeType(), avrov2.NewDeserializerConfig())
	if err != nil {
		return nil, fmt.Errorf("registry: avro deserializer: %w", err)
	}
	return codec[T]{topic: topic, ser: ser.Serialize, into: de.DeserializeInto, fresh: zero[T], byPointer: true}, nil
}

// JSONSchema returns a serde of T in JSON, with a JSON Schema derived from
// T by invopop/jsonschema. What it writes is checked against the schema;
// what it reads is decoded into T as encoding/json does (confluent-kafka-go
// checks only decoded maps, not structs, against a schema).
func JSONSchema[T any](client schemaregistry.Client, topic string, part Part, opts Options) (serde.Serde[T], error) {
	sc := jsonschema.NewSerializerConfig()
	sc.AutoRegisterSchemas, sc.UseLatestVersion = !opts.UseLatest, opts.UseLatest
	sc.EnableValidation = true
	ser, err := jsonschema.NewSerializer(client, part.serdeType(), sc)
	if err != nil {
		return nil, fmt.Errorf("registry: json schema serializer: %w", err)
	}
	de, err := jsonschema.NewDeserializer(client, part.serdeType(), jsonschema.NewDeserializerConfig())
	if err != nil {
		return nil, fmt.Errorf("registry: json schema deserializer: %w", err)
	}
	return codec[T]{topic: topic, ser: ser.Serialize, into: de.DeserializeInto, fresh: zero[T]}, nil
}

// Protobuf returns a serde of the Protobuf message type T (a generated
// message pointer, such as *pb.Order), its schema the message's file
// descriptor.
func Protobuf[T proto.Message](client schemaregistry.Client, topic string, part Part, opts Options) (serde.Serde[T], error) {
	sc := protobuf.NewSerializerConfig()
	sc.AutoRegisterSchemas, sc.UseLatestVersion = !opts.UseLatest, opts.UseLatest
	ser, err := protobuf.NewSerializer(client, part.serdeType(), sc)
	if err != nil {
		return nil, fmt.Errorf("registry: protobuf serializer: %w", err)
	}
	de, err := protobuf.NewDeserializer(client, part.serdeType(), protobuf.NewDeserializerConfig())
	if err != nil {
		return nil, fmt.Errorf("registry: protobuf deserializer: %w", err)
	}
	fresh := func() T { return zero[T]().ProtoReflect().Type().New().Interface().(T) }
	if err := de.ProtoRegistry.RegisterMessage(fresh().ProtoReflect().Type()); err != nil {
		return nil, fmt.Errorf("registry: protobuf message type: %w", err)
	}
	return protoCodec[T]{codec[T]{topic: topic, ser: ser.Serialize, into: de.DeserializeInto, fresh: fresh}}, nil
}
