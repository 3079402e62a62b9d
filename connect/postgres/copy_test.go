package postgres

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAppendCopyRow(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		key     map[string]json.RawMessage
		cols    []string
		want    string
		wantErr string
	}{
		{"scalars in column order", `{"b": 2, "a": "x", "c": true}`, nil, []string{"a", "b", "c"}, "x\t2\ttrue\n", ""},
		{"null is NULL", `{"a": null}`, nil, []string{"a"}, "\\N\n", ""},
		{"escapes of JSON become text, then COPY's", `{"a": "tab\there\nline \\ back \"q\" \u00e9"}`, nil, []string{"a"}, "tab\\there\\nline \\\\ back \"q\" \u00e9\n", ""},
		{"objects and arrays stay JSON", `{"a": {"x": [1, "a\tb"]}}`, nil, []string{"a"}, "{\"x\": [1, \"a\\\\tb\"]}\n", ""},
		{"the key wins over the value", `{"id": "v", "n": 1}`, map[string]json.RawMessage{"id": json.RawMessage(`"k"`)}, []string{"id", "n"}, "k\t1\n", ""},
		{"the last of a repeated field wins", `{"a": 1, "a": 2}`, nil, []string{"a"}, "2\n", ""},
		{"a column the row leaves out is NULL", `{"a": 1}`, nil, []string{"a", "b"}, "1\t\\N\n", ""},
		{"a string that is not JSON", `{"a": "\x"}`, nil, []string{"a"}, "", "a string value is not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := appendCopyRow(nil, []byte(tt.doc), tt.key, tt.cols, make([][]byte, len(tt.cols)))
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
		})
	}
}

func TestSingleKey(t *testing.T) {
	for in, want := range map[string]string{"o0001": `"o0001"`, `"c1"`: `"c1"`, "42": "42", `{"a":1}`: `{"a":1}`,
		"with \"quote\"": `"with \"quote\""`, "tab\tkey": `"tab\tkey"`, "01x": `"01x"`} {
		assert.Equal(t, want, string(singleKey([]byte(in))), in)
	}
}
