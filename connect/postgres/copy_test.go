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

// An upsert's run is cut before a key it holds comes again: one
// statement cannot change a row twice, and a batch that tried would be
// written again one row at a time.
func TestAnUpsertRunEndsBeforeAKeyComesAgain(t *testing.T) {
	tb := &table{name: identifier("stock"), pk: []string{"item"}, columns: map[string]bool{"item": true, "n": true}, sql: map[string]string{}}
	task := &task{s: settings{mode: "upsert", upsert: true}}
	var stmts []statement
	for _, item := range []string{"1", "2", "1", "3", "2", "2"} {
		stmts = append(stmts, statement{tb: tb, cols: "item,n", insert: true, value: []byte(`{"n":1}`), key: map[string]json.RawMessage{"item": json.RawMessage(item)}})
	}
	got := task.group(stmts)
	var runs []int
	for _, st := range got {
		doc := st.args[0].(string)
		if doc[0] == '{' {
			runs = append(runs, 1) // a row alone
			continue
		}
		var rows []map[string]any
		require.NoError(t, json.Unmarshal([]byte(doc), &rows), doc)
		runs = append(runs, len(rows))
	}
	assert.Equal(t, []int{2, 3, 1}, runs, "1 2 | 1 3 2 | 2")
}
