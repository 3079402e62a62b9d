package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// appendCopyRow appends the JSON object doc, with the key's columns, as
// one row of COPY's text format, its fields in the order of cols (sorted;
// doc and key name each of them, the key's and then the last of a
// repeated field winning, as json_populate_record reads them). Each value is given as Postgres's input function for its column
// would read it from json_populate_record: a string's text, a number or
// boolean as written, an object or array as its JSON text, null as NULL.
func appendCopyRow(dst, doc []byte, key map[string]json.RawMessage, cols []string, vals [][]byte) ([]byte, error) {
	clear(vals)
	err := eachField(doc, func(name string, v []byte) {
		if i, ok := slices.BinarySearch(cols, name); ok {
			vals[i] = v
		}
	})
	if err != nil {
		return dst, err
	}
	for name, v := range key { // the key's columns win over the value's
		if i, ok := slices.BinarySearch(cols, name); ok {
			vals[i] = v
		}
	}
	for i, v := range vals {
		if i > 0 {
			dst = append(dst, '\t')
		}
		switch {
		case v == nil:
			return dst, fmt.Errorf("no field %q", cols[i])
		case string(v) == "null":
			dst = append(dst, '\\', 'N')
		case v[0] == '"':
			s, err := jsonString(v)
			if err != nil {
				return dst, err
			}
			dst = appendCopyText(dst, s)
		default:
			dst = appendCopyText(dst, v)
		}
	}
	return append(dst, '\n'), nil
}

// jsonString is the text of the JSON string v.
func jsonString(v []byte) ([]byte, error) {
	if !slices.Contains(v[1:len(v)-1], '\\') {
		return v[1 : len(v)-1], nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, errors.New("a string value is not valid JSON")
	}
	return []byte(s), nil
}

// appendCopyText appends b escaped for COPY's text format.
func appendCopyText(dst, b []byte) []byte {
	for _, c := range b {
		switch c {
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}
