package postgres

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/connect"
)

// Every wrong setting is named in the error, with why; a valid one
// parses to what it says.
func TestSettingsAreCheckedByName(t *testing.T) {
	url := "postgres://u@127.0.0.1:5432/db"
	tests := []struct {
		name  string
		give  map[string]string
		field string // the setting the error names; "" for none
		want  string
	}{
		{name: "valid", give: map[string]string{ConnectionURL: url, PKMode: "record_key", InsertMode: "upsert", DeleteEnabled: "true"}},
		{name: "no url", give: map[string]string{}, field: ConnectionURL, want: "is required"},
		{name: "bad url", give: map[string]string{ConnectionURL: "postgres://u@[::1"}, field: ConnectionURL},
		{name: "unknown mode", give: map[string]string{ConnectionURL: url, InsertMode: "merge"}, field: InsertMode, want: `"merge" is not one of insert, upsert`},
		{name: "not a number", give: map[string]string{ConnectionURL: url, BatchSize: "many"}, field: BatchSize, want: "not a whole number"},
		{name: "batch of none", give: map[string]string{ConnectionURL: url, BatchSize: "0"}, field: BatchSize, want: "at least 1"},
		{name: "not a boolean", give: map[string]string{ConnectionURL: url, DeleteEnabled: "yes please"}, field: DeleteEnabled, want: "not true or false"},
		{name: "value key without fields", give: map[string]string{ConnectionURL: url, PKMode: "record_value"}, field: PKFields, want: "required with pk.mode record_value"},
		{name: "deletes without a key", give: map[string]string{ConnectionURL: url, DeleteEnabled: "true"}, field: DeleteEnabled, want: "needs pk.mode record_key"},
		{name: "upsert without a key", give: map[string]string{ConnectionURL: url, InsertMode: "upsert"}, field: InsertMode, want: "needs a primary key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Sink{}.Config().Parse(tt.give)
			if err == nil {
				_, err = parse(cfg)
			}
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, connect.ErrInvalidConfig)
			var fe *connect.FieldError
			require.True(t, errors.As(err, &fe), "%v", err)
			assert.Equal(t, tt.field, fe.Field)
			assert.Contains(t, err.Error(), tt.field)
			assert.Contains(t, fe.Reason, tt.want)
		})
	}
}

// Validate reports every setting, given or defaulted, with its errors,
// and counts them, as Kafka Connect's validate endpoint does.
func TestValidateReportsEverySetting(t *testing.T) {
	v := Sink{}.Config().Validate(map[string]string{InsertMode: "merge"})
	assert.Equal(t, 2, v.ErrorCount, "the missing url and the unknown mode")
	byName := map[string]connect.Value{}
	for _, val := range v.Values {
		byName[val.Key.Name] = val
	}
	assert.Len(t, byName, len(Sink{}.Config().Keys))
	assert.Equal(t, "3000", byName[BatchSize].Value)
	assert.False(t, byName[BatchSize].Given)
	assert.NotEmpty(t, byName[ConnectionURL].Errors)
	assert.NotEmpty(t, byName[InsertMode].Errors)
	assert.Empty(t, byName[PKMode].Errors)
}
