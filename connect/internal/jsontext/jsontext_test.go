package jsontext_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"

	"github.com/causeway-stream/causeway/connect/internal/jsontext"
)

func TestAppendString(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{name: "plain", in: "order 7", want: `"order 7"`},
		{name: "empty", in: "", want: `""`},
		{name: "quote and backslash", in: `a"b\c`, want: `"a\"b\\c"`},
		{name: "short escapes", in: "\n\r\t\b\f", want: `"\n\r\t\b\f"`},
		{name: "other control characters", in: "\x00\x07\x0b\x1b\x1f", want: `"\u0000\u0007\u000b\u001b\u001f"`},
		{name: "DEL and HTML as they are", in: "\x7f<a>&", want: "\"\x7f<a>&\""},
		{name: "UTF-8 as it is", in: "é✓\U000E0001\u2028", want: "\"é✓\U000E0001\u2028\""},
		{name: "a byte that is not UTF-8", in: "a\xffb\xc3", want: `"a\ufffdb\ufffd"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := jsontext.AppendString([]byte("x"), c.in)
			assert.Equal(t, "x"+c.want, string(got))
		})
	}
}

// readBack checks that a JSON reader reads quote's literal of s back as
// what encoding/json would have written of s.
func readBack(quote func([]byte, string) []byte, s string) error {
	lit := quote(nil, s)
	var got, want string
	if err := json.Unmarshal(lit, &got); err != nil {
		return fmt.Errorf("%q: %w", lit, err)
	}
	std, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(std, &want); err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%q read back as %q, want %q", s, got, want)
	}
	return nil
}

func TestAppendStringIsReadBackAsEncodingJSONWritesIt(t *testing.T) {
	anyBytes := rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) })
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.OneOf(rapid.String(), anyBytes).Draw(t, "s")
		if err := readBack(jsontext.AppendString, s); err != nil {
			t.Fatal(err)
		}
	})
}

// The negative control: the check catches Go's quoting, which the
// connectors wrote before.
func TestReadBackCatchesGoQuoting(t *testing.T) {
	for _, s := range []string{"\x1b", "\a", "\v", "\U000E0001", "\xff"} {
		assert.Error(t, readBack(strconv.AppendQuote, s), "%q", s)
	}
}
