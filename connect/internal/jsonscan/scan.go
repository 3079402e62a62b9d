// Package jsonscan reads the top level of a JSON object without decoding
// its values: the field names and the raw bytes of each value, which is
// all a sink needs to route a row and all a converter needs to split an
// envelope. Postgres, or the reader of a value, checks the values.
package jsonscan

import (
	"errors"
	"strconv"
)

// TopKeys returns the names of the top-level fields of the JSON object b,
// in order, without decoding their values. It checks the object's shape
// (braces, keys, colons, commas) and skips each value over its strings and
// brackets; Postgres checks the values themselves when it reads the row.
func TopKeys(b []byte, dst []string) ([]string, error) {
	err := EachField(b, func(name string, _ []byte) { dst = append(dst, name) })
	return dst, err
}

// EachField calls f with the name and the raw value of each top-level
// field of the JSON object b, in order.
func EachField(b []byte, f func(name string, value []byte)) error {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errors.New("not a JSON object")
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return trailing(b, i+1)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return errors.New("a field name must be a string")
		}
		end, escaped, err := stringEnd(b, i)
		if err != nil {
			return err
		}
		name := string(b[i+1 : end-1])
		if escaped {
			if name, err = strconv.Unquote(string(b[i:end])); err != nil {
				return errors.New("a field name is not a valid string")
			}
		}
		i = SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return errors.New("a field name must be followed by a colon")
		}
		from := SkipSpace(b, i+1)
		if i, err = SkipValue(b, from); err != nil {
			return err
		}
		f(name, b[from:i])
		i = SkipSpace(b, i)
		switch {
		case i < len(b) && b[i] == ',':
			i = SkipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			return trailing(b, i+1)
		default:
			return errors.New("a field must be followed by a comma or the closing brace")
		}
	}
}

// SkipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func trailing(b []byte, i int) error {
	if SkipSpace(b, i) != len(b) {
		return errors.New("something follows the object")
	}
	return nil
}

// stringEnd returns the index just past the string starting at b[i] (a
// quote), and whether it holds escapes.
func stringEnd(b []byte, i int) (int, bool, error) {
	escaped := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped, nil
		}
	}
	return 0, false, errors.New("a string is not closed")
}

// SkipValue returns the index just past the value starting at b[i].
func SkipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errors.New("a value is missing")
	}
	switch b[i] {
	case '"':
		end, _, err := stringEnd(b, i)
		return end, err
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _, err := stringEnd(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errors.New("a value is not closed")
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		if j == i {
			return 0, errors.New("a value is missing")
		}
		return j, nil
	}
}
