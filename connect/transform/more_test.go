package transform_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/transform"
	"github.com/causeway-stream/causeway/framework"
)

// order is a value schema with a nested struct, as a converter reads one.
var order = &connect.Schema{Type: "struct", Fields: []connect.Schema{
	{Field: "id", Type: "int64"},
	{Field: "card", Type: "string", Optional: true},
	{Field: "qty", Type: "string"},
	{Field: "ship", Type: "struct", Optional: true, Fields: []connect.Schema{{Field: "city", Type: "string"}, {Field: "zip", Type: "string", Optional: true}}},
}}

// fieldsOf lists a schema's fields as name:type, with ? for optional.
func fieldsOf(s *connect.Schema) []string {
	var out []string
	for _, f := range s.Fields {
		name := f.Field + ":" + f.Type
		if f.Optional {
			name += "?"
		}
		out = append(out, name)
	}
	return out
}

// Each of Kafka's transforms changes the data as Kafka's does, and the
// Connect schema with it, so that a sink given the schema (auto.create,
// its logical types) sees what the data is after the transform.
func TestTransformsChangeDataAndSchemaTogether(t *testing.T) {
	const p = "org.apache.kafka.connect.transforms."
	at := time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)
	in := transform.Record{Topic: "orders", Partition: 2, Offset: 9, Timestamp: at, Key: []byte(`"o1"`),
		Value: []byte(`{"id":1,"card":"4111","qty":"3","ship":{"city":"Oslo","zip":null}}`), ValueSchema: order}
	tests := []struct {
		name       string
		cfg        map[string]string
		wantValue  string
		wantFields []string
		wantKey    string
	}{
		{"flatten", map[string]string{"transforms": "f", "transforms.f.type": p + "Flatten$Value", "transforms.f.delimiter": "_"},
			`{"id":1,"card":"4111","qty":"3","ship_city":"Oslo","ship_zip":null}`, []string{"id:int64", "card:string?", "qty:string", "ship_city:string?", "ship_zip:string?"}, `"o1"`},
		{"cast fields", map[string]string{"transforms": "c", "transforms.c.type": p + "Cast$Value", "transforms.c.spec": "qty:int32,id:string"},
			`{"id":"1","card":"4111","qty":3,"ship":{"city":"Oslo","zip":null}}`, []string{"id:string", "card:string?", "qty:int32", "ship:struct?"}, `"o1"`},
		{"mask", map[string]string{"transforms": "m", "transforms.m.type": p + "MaskField$Value", "transforms.m.fields": "card,id"},
			`{"id":0,"card":"","qty":"3","ship":{"city":"Oslo","zip":null}}`, []string{"id:int64", "card:string?", "qty:string", "ship:struct?"}, `"o1"`},
		{"mask with a replacement", map[string]string{"transforms": "m", "transforms.m.type": p + "MaskField$Value", "transforms.m.fields": "card", "transforms.m.replacement": "****"},
			`{"id":1,"card":"****","qty":"3","ship":{"city":"Oslo","zip":null}}`, []string{"id:int64", "card:string?", "qty:string", "ship:struct?"}, `"o1"`},
		{"insert the record's coordinates", map[string]string{"transforms": "i", "transforms.i.type": p + "InsertField$Value", "transforms.i.topic.field": "t",
			"transforms.i.partition.field": "p!", "transforms.i.offset.field": "o", "transforms.i.timestamp.field": "ts", "transforms.i.static.field": "src", "transforms.i.static.value": "web"},
			`{"id":1,"card":"4111","qty":"3","ship":{"city":"Oslo","zip":null},"t":"orders","p":2,"o":9,"ts":1709287200000,"src":"web"}`,
			[]string{"id:int64", "card:string?", "qty:string", "ship:struct?", "t:string?", "p:int32?", "o:int64?", "ts:int64?", "src:string?"}, `"o1"`},
		{"old ReplaceField names, then hoist", map[string]string{"transforms": "r,h", "transforms.r.type": p + "ReplaceField$Value", "transforms.r.blacklist": "card,ship",
			"transforms.r.renames": "qty:quantity", "transforms.h.type": p + "HoistField$Value", "transforms.h.field": "order"},
			`{"order":{"id":1,"quantity":"3"}}`, []string{"order:struct"}, `"o1"`},
		{"value to key", map[string]string{"transforms": "k", "transforms.k.type": p + "ValueToKey", "transforms.k.fields": "id"},
			`{"id":1,"card":"4111","qty":"3","ship":{"city":"Oslo","zip":null}}`, []string{"id:int64", "card:string?", "qty:string", "ship:struct?"}, `{"id":1}`},
		{"a predicate that does not match leaves the record", map[string]string{"transforms": "m", "transforms.m.type": p + "MaskField$Value", "transforms.m.fields": "card",
			"transforms.m.predicate": "other", "predicates": "other", "predicates.other.type": "TopicNameMatches", "predicates.other.pattern": "pay.*"},
			`{"id":1,"card":"4111","qty":"3","ship":{"city":"Oslo","zip":null}}`, []string{"id:int64", "card:string?", "qty:string", "ship:struct?"}, `"o1"`},
		{"negated, it applies", map[string]string{"transforms": "m", "transforms.m.type": p + "MaskField$Value", "transforms.m.fields": "card",
			"transforms.m.predicate": "other", "transforms.m.negate": "true", "predicates": "other", "predicates.other.type": "TopicNameMatches", "predicates.other.pattern": "pay.*"},
			`{"id":1,"card":"","qty":"3","ship":{"city":"Oslo","zip":null}}`, []string{"id:int64", "card:string?", "qty:string", "ship:struct?"}, `"o1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := transform.Parse(tt.cfg)
			require.NoError(t, err)
			got, err := c.Apply(in)
			require.NoError(t, err)
			assert.JSONEq(t, tt.wantValue, string(got.Value))
			assert.JSONEq(t, tt.wantKey, string(got.Key))
			require.NotNil(t, got.ValueSchema)
			assert.Equal(t, tt.wantFields, fieldsOf(got.ValueSchema))
			again, err := c.Apply(in)
			require.NoError(t, err)
			assert.Same(t, got.ValueSchema, again.ValueSchema, "one schema in, one schema out")
			assert.Equal(t, fieldsOf(order), []string{"id:int64", "card:string?", "qty:string", "ship:struct?"}, "the schema given is not changed")
		})
	}
}

// Filter with a predicate drops what the predicate matches, with
// connect.ErrFiltered; the header transforms drop, insert, copy and move
// headers.
func TestFilterAndTheHeaderTransforms(t *testing.T) {
	const p = "org.apache.kafka.connect.transforms."
	c, err := transform.Parse(map[string]string{"transforms": "drop", "transforms.drop.type": p + "Filter", "transforms.drop.predicate": "tomb",
		"predicates": "tomb", "predicates.tomb.type": "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"})
	require.NoError(t, err)
	_, err = c.Apply(transform.Record{Key: []byte(`1`)})
	assert.True(t, errors.Is(err, connect.ErrFiltered), "%v", err)
	_, err = c.Apply(transform.Record{Key: []byte(`1`), Value: []byte(`{}`)})
	assert.NoError(t, err)

	c, err = transform.Parse(map[string]string{"transforms": "d,i,m", "transforms.d.type": p + "DropHeaders", "transforms.d.headers": "secret",
		"transforms.i.type": p + "InsertHeader", "transforms.i.header": "source", "transforms.i.value.literal": "shop",
		"transforms.m.type": p + "HeaderFrom$Value", "transforms.m.fields": "id,tag", "transforms.m.headers": "order-id,tag", "transforms.m.operation": "move",
		"transforms.m.predicate": "has", "predicates": "has", "predicates.has.type": "HasHeaderKey", "predicates.has.name": "trace"})
	require.NoError(t, err)
	got, err := c.Apply(transform.Record{Value: []byte(`{"id":7,"tag":"x","n":1}`), ValueSchema: &connect.Schema{Type: "struct",
		Fields: []connect.Schema{{Field: "id", Type: "int32"}, {Field: "tag", Type: "string"}, {Field: "n", Type: "int32"}}},
		Headers: []framework.Header{{Key: "secret", Value: []byte("s")}, {Key: "trace", Value: []byte("t")}}})
	require.NoError(t, err)
	assert.Equal(t, []framework.Header{{Key: "trace", Value: []byte("t")}, {Key: "source", Value: []byte("shop")},
		{Key: "order-id", Value: []byte("7")}, {Key: "tag", Value: []byte("x")}}, got.Headers)
	assert.JSONEq(t, `{"n":1}`, string(got.Value))
	assert.Equal(t, []string{"n:int32"}, fieldsOf(got.ValueSchema))
}

// TimestampConverter reads a time in any of its forms (a string in a
// SimpleDateFormat pattern, a unix time, a Connect Date or Timestamp) and
// writes it in another, changing the field's schema; TimestampRouter
// names a topic by the record's timestamp.
func TestTimestampConverterAndRouter(t *testing.T) {
	const p = "org.apache.kafka.connect.transforms."
	ts := &connect.Schema{Type: "struct", Fields: []connect.Schema{{Field: "at", Type: "int64", Name: connect.LogicalTimestamp, Optional: true}}}
	tests := []struct {
		name     string
		cfg      map[string]string
		in       string
		schema   *connect.Schema
		want     string
		wantType string
	}{
		{"timestamp to string", map[string]string{"target.type": "string", "format": "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"}, `{"at":1709287200123}`, ts,
			`{"at":"2024-03-01T10:00:00.123Z"}`, "string"},
		{"string to timestamp", map[string]string{"target.type": "Timestamp", "format": "dd/MM/yyyy HH:mm"}, `{"at":"01/03/2024 10:00"}`, nil,
			`{"at":1709287200000}`, ""},
		{"unix seconds to date", map[string]string{"target.type": "Date", "unix.precision": "seconds"}, `{"at":1709287200}`, nil,
			`{"at":19783}`, ""},
		{"timestamp to time of day", map[string]string{"target.type": "Time"}, `{"at":1709287200123}`, ts, `{"at":36000123}`, "int32"},
		{"timestamp to unix microseconds", map[string]string{"target.type": "unix", "unix.precision": "microseconds"}, `{"at":1709287200123}`, ts,
			`{"at":1709287200123000}`, "int64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := map[string]string{"transforms": "c", "transforms.c.type": p + "TimestampConverter$Value", "transforms.c.field": "at"}
			for k, v := range tt.cfg {
				cfg["transforms.c."+k] = v
			}
			c, err := transform.Parse(cfg)
			require.NoError(t, err)
			got, err := c.Apply(transform.Record{Value: []byte(tt.in), ValueSchema: tt.schema})
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(got.Value))
			if tt.wantType != "" {
				assert.Equal(t, tt.wantType, got.ValueSchema.FieldSchema("at").Type)
			}
		})
	}
	_, err := transform.Parse(map[string]string{"transforms": "c", "transforms.c.type": p + "TimestampConverter$Value", "transforms.c.target.type": "string", "transforms.c.format": "yyyy-ww"})
	assert.ErrorContains(t, err, `the pattern letter 'w' is not one Causeway reads`)

	c, err := transform.Parse(map[string]string{"transforms": "r", "transforms.r.type": p + "TimestampRouter", "transforms.r.topic.format": "${topic}_${timestamp}", "transforms.r.timestamp.format": "yyyy-MM"})
	require.NoError(t, err)
	assert.True(t, c.Routes())
	got, err := c.Apply(transform.Record{Topic: "orders", Timestamp: time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	assert.Equal(t, "orders_2024-03", got.Topic)
}
