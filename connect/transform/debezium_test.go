package transform_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/transform"
)

// Debezium's ExtractNewRecordState, as its documentation describes each
// setting.
func TestExtractNewRecordState(t *testing.T) {
	const (
		create = `{"before":null,"after":{"id":1,"n":"a"},"source":{},"op":"c","ts_ms":1}`
		update = `{"before":null,"after":{"id":1,"n":"b"},"source":{},"op":"u","ts_ms":1}`
		del    = `{"before":{"id":1,"n":null},"after":null,"source":{},"op":"d","ts_ms":1}`
		trunc  = `{"before":null,"after":null,"source":{},"op":"t","ts_ms":1}`
	)
	type out struct {
		value    string // "" for a tombstone
		filtered bool
		err      error
	}
	cases := []struct {
		name     string
		settings map[string]string
		in       []string // "" for a tombstone
		want     []out
	}{
		{name: "defaults: rows, deletes and tombstones dropped", in: []string{create, update, del, ""},
			want: []out{{value: `{"id":1,"n":"a"}`}, {value: `{"id":1,"n":"b"}`}, {filtered: true}, {filtered: true}}},
		{name: "deletes as tombstones, tombstones kept", settings: map[string]string{"delete.handling.mode": "none", "drop.tombstones": "false"},
			in: []string{del, ""}, want: []out{{}, {}}},
		{name: "deletes rewritten", settings: map[string]string{"delete.handling.mode": "rewrite"}, in: []string{create, del},
			want: []out{{value: `{"__deleted":"false","id":1,"n":"a"}`}, {value: `{"__deleted":"true","id":1,"n":null}`}}},
		{name: "not a change event: as it is", in: []string{`{"status":"END","id":"1:2"}`}, want: []out{{value: `{"status":"END","id":"1:2"}`}}},
		{name: "a truncate is refused", in: []string{trunc}, want: []out{{err: transform.ErrTruncate}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := map[string]string{"transforms": "x", "transforms.x.type": transform.ExtractNewRecordState}
			for k, v := range c.settings {
				cfg["transforms.x."+k] = v
			}
			chain, err := transform.Parse(cfg)
			require.NoError(t, err)
			for i, in := range c.in {
				r := transform.Record{Topic: "shop.public.t", Key: []byte(`{"id":1}`)}
				if in != "" {
					r.Value = []byte(in)
				}
				got, err := chain.Apply(r)
				w := c.want[i]
				switch {
				case w.filtered:
					require.ErrorIs(t, err, connect.ErrFiltered)
				case w.err != nil:
					require.ErrorIs(t, err, w.err)
				default:
					require.NoError(t, err)
					if w.value == "" {
						assert.Nil(t, got.Value)
					} else {
						assert.JSONEq(t, w.value, string(got.Value))
					}
					assert.Equal(t, `{"id":1}`, string(got.Key))
				}
			}
		})
	}
}

// With a schema, the row's schema is the envelope's after (or, rewritten,
// before with __deleted); unknown settings are refused by name.
func TestExtractNewRecordStateSchemasAndSettings(t *testing.T) {
	row := connect.Schema{Type: "struct", Name: "shop.public.t.Value", Optional: true, Fields: []connect.Schema{{Type: "int32", Field: "id"}}}
	before, after := row, row
	before.Field, after.Field = "before", "after"
	env := &connect.Schema{Type: "struct", Name: "shop.public.t.Envelope", Fields: []connect.Schema{before, after, {Type: "string", Field: "op"}}}
	for _, mode := range []string{"drop", "rewrite"} {
		chain, err := transform.Parse(map[string]string{"transforms": "x", "transforms.x.type": transform.ExtractNewRecordState, "transforms.x.delete.handling.mode": mode})
		require.NoError(t, err)
		got, err := chain.Apply(transform.Record{Value: []byte(`{"before":null,"after":{"id":1},"op":"c"}`), ValueSchema: env})
		require.NoError(t, err)
		require.NotNil(t, got.ValueSchema)
		assert.Equal(t, "shop.public.t.Value", got.ValueSchema.Name)
		var names []string
		for _, f := range got.ValueSchema.Fields {
			names = append(names, f.Field)
		}
		want := []string{"id"}
		if mode == "rewrite" {
			want = append(want, "__deleted")
		}
		assert.Equal(t, want, names, mode)
		b, _ := json.Marshal(env)
		assert.NotContains(t, string(b), "__deleted", "the envelope's schema is left as it was")
	}
	_, err := transform.Parse(map[string]string{"transforms": "x", "transforms.x.type": transform.ExtractNewRecordState, "transforms.x.add.fields": "op"})
	require.ErrorIs(t, err, connect.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "transforms.x.add.fields")
}
