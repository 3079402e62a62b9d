package jsonscan

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"
)

// TopKeys names the fields of an object as encoding/json reads them, and
// refuses what is not an object.
func TestTopKeys(t *testing.T) {
	tests := []struct {
		give string
		want []string
		bad  bool
	}{
		{give: `{}`, want: nil},
		{give: ` { "a" : 1 , "b":"x,}" ,"c":{"d":[1,{"e":"]"}]},"f":null} `, want: []string{"a", "b", "c", "f"}},
		{give: `{"q\"uote":true,"\u00e9":-1.5e3}`, want: []string{`q"uote`, "é"}},
		{give: `[1]`, bad: true},
		{give: `{"a" 1}`, bad: true},
		{give: `{"a":1,}`, bad: true},
		{give: `{"a":1} x`, bad: true},
		{give: `{"a":"open}`, bad: true},
		{give: `{"a":{"b":1}`, bad: true},
		{give: `{a:1}`, bad: true},
		{give: ``, bad: true},
	}
	for _, tt := range tests {
		got, err := TopKeys([]byte(tt.give), nil)
		if tt.bad {
			assert.Error(t, err, tt.give)
			continue
		}
		assert.NoError(t, err, tt.give)
		assert.Equal(t, tt.want, got, tt.give)
	}
}

// For any object encoding/json writes, TopKeys finds its fields.
func TestTopKeysAgreesWithEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		obj := rapid.MapOf(rapid.String(), rapid.OneOf(
			rapid.Map(rapid.Int(), func(i int) any { return i }),
			rapid.Map(rapid.String(), func(s string) any { return s }),
			rapid.Map(rapid.SliceOf(rapid.String()), func(s []string) any { return s }),
			rapid.Just[any](nil),
		)).Draw(t, "object")
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		got, err := TopKeys(b, nil)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(m) {
			t.Fatalf("%s: got %q", b, got)
		}
		for _, k := range got {
			if _, ok := m[k]; !ok {
				t.Fatalf("%s: %q is not a field", b, k)
			}
		}
	})
}
