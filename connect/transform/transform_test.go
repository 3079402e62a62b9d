package transform_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/transform"
)

func TestTransforms(t *testing.T) {
	const p = "org.apache.kafka.connect.transforms."
	tests := []struct {
		name    string
		cfg     map[string]string
		in      transform.Record
		want    transform.Record
		wantErr string
	}{
		{"none", map[string]string{}, transform.Record{Topic: "t", Value: []byte(`{"a":1}`)}, transform.Record{Topic: "t", Value: []byte(`{"a":1}`)}, ""},
		{"drop and rename value fields",
			map[string]string{"transforms": "r", "transforms.r.type": p + "ReplaceField$Value", "transforms.r.exclude": "secret", "transforms.r.renames": "a:b"},
			transform.Record{Value: []byte(`{"a":1,"secret":"x","c":true}`)}, transform.Record{Value: []byte(`{"b":1,"c":true}`)}, ""},
		{"keep only some fields, short type name",
			map[string]string{"transforms": "r", "transforms.r.type": "ReplaceField$Value", "transforms.r.include": "a"},
			transform.Record{Value: []byte(`{"a":[1,2],"b":2}`)}, transform.Record{Value: []byte(`{"a":[1,2]}`)}, ""},
		{"value to key, then the key's one field",
			map[string]string{"transforms": "k,x", "transforms.k.type": p + "ValueToKey", "transforms.k.fields": "id",
				"transforms.x.type": p + "ExtractField$Key", "transforms.x.field": "id"},
			transform.Record{Value: []byte(`{"id":7,"name":"n"}`)}, transform.Record{Key: []byte(`7`), Value: []byte(`{"id":7,"name":"n"}`)}, ""},
		{"route a topic with a group",
			map[string]string{"transforms": "r", "transforms.r.type": p + "RegexRouter", "transforms.r.regex": "src_(.*)", "transforms.r.replacement": "shop.$1"},
			transform.Record{Topic: "src_orders"}, transform.Record{Topic: "shop.orders"}, ""},
		{"a topic the regex does not match whole stays",
			map[string]string{"transforms": "r", "transforms.r.type": p + "RegexRouter", "transforms.r.regex": "src", "transforms.r.replacement": "x"},
			transform.Record{Topic: "src_orders"}, transform.Record{Topic: "src_orders"}, ""},
		{"a tombstone passes value transforms",
			map[string]string{"transforms": "r", "transforms.r.type": p + "ReplaceField$Value", "transforms.r.exclude": "a"},
			transform.Record{Key: []byte(`"k"`)}, transform.Record{Key: []byte(`"k"`)}, ""},
		{"a value that is not an object is named",
			map[string]string{"transforms": "r", "transforms.r.type": p + "ReplaceField$Value", "transforms.r.exclude": "a"},
			transform.Record{Value: []byte(`[1]`)}, transform.Record{}, `transform "r": the record's value is not a JSON object`},
		{"a missing field is named",
			map[string]string{"transforms": "k", "transforms.k.type": p + "ValueToKey", "transforms.k.fields": "id"},
			transform.Record{Value: []byte(`{"x":1}`)}, transform.Record{}, `transform "k": the record's value has no field "id"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := transform.Parse(tt.cfg)
			require.NoError(t, err)
			got, err := c.Apply(tt.in)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want.Topic, got.Topic)
			assert.Equal(t, string(tt.want.Key), string(got.Key))
			assert.Equal(t, string(tt.want.Value), string(got.Value))
		})
	}
}

func TestParseNamesTheSettingThatIsWrong(t *testing.T) {
	tests := []struct {
		cfg  map[string]string
		want []string
	}{
		{map[string]string{"transforms": "a"}, []string{`setting "transforms.a.type": is required`}},
		{map[string]string{"transforms": "a", "transforms.a.type": "com.example.Enrich"}, []string{`setting "transforms.a.type": "com.example.Enrich" is not a transform Causeway has (Cast$Key, Cast$Value, DropHeaders, ExtractField$Key, ExtractField$Value, Filter, Flatten$Key, Flatten$Value, HeaderFrom$Key, HeaderFrom$Value, HoistField$Key, HoistField$Value, InsertField$Key, InsertField$Value, InsertHeader, MaskField$Key, MaskField$Value, RegexRouter, ReplaceField$Key, ReplaceField$Value, TimestampConverter$Key, TimestampConverter$Value, TimestampRouter, ValueToKey, io.debezium.transforms.ExtractNewRecordState)`}},
		{map[string]string{"transforms": "a", "transforms.a.type": "Filter", "transforms.a.predicate": "p"}, []string{`setting "transforms.a.predicate": "p" is not in predicates`}},
		{map[string]string{"predicates": "p", "predicates.p.type": "TopicNameMatches"}, []string{`setting "predicates.p.pattern": is required`}},
		{map[string]string{"transforms": "a", "transforms.a.type": "Cast$Value", "transforms.a.spec": "x:int128"}, []string{`setting "transforms.a.spec": "x:int128": "int128" is not one of int8, int16, int32, int64, float32, float64, boolean, string`}},
		{map[string]string{"transforms": "a", "transforms.a.type": "HeaderFrom$Value", "transforms.a.fields": "a,b", "transforms.a.headers": "x", "transforms.a.operation": "copy"}, []string{`setting "transforms.a.headers": must name one header for each of fields`}},
		{map[string]string{"transforms": "a,b", "transforms.a.type": "ValueToKey", "transforms.b.type": "RegexRouter", "transforms.b.regex": "("},
			[]string{`setting "transforms.a.fields": is required`, "setting \"transforms.b.regex\": error parsing regexp: missing closing ): `^(?:()$`"}},
		{map[string]string{"transforms": "a", "transforms.a.type": "ReplaceField$Key", "transforms.a.renames": "x"}, []string{`setting "transforms.a.renames": "x" is not old:new`}},
	}
	for _, tt := range tests {
		_, err := transform.Parse(tt.cfg)
		require.Error(t, err)
		assert.ErrorIs(t, err, connect.ErrInvalidConfig)
		var got []string
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			var fe *connect.FieldError
			require.True(t, errors.As(e, &fe))
			got = append(got, fe.Error())
		}
		assert.Equal(t, tt.want, got)
	}
}
