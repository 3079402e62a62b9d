package transform

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/causeway-stream/causeway/connect"
)

// javaLayout translates a java.text.SimpleDateFormat pattern, as Kafka's
// TimestampConverter and TimestampRouter take them, into a Go time
// layout. It knows the letters timestamps are written with (y M d H h m s
// S a E Z X z) and quoted literals; another letter is refused, naming it.
func javaLayout(pattern string) (string, error) {
	var out strings.Builder
	for i := 0; i < len(pattern); {
		c := pattern[i]
		if c == '\'' { // a quoted literal; '' is a quote
			j := i + 1
			for j < len(pattern) && pattern[j] != '\'' {
				j++
			}
			if j == i+1 {
				out.WriteByte('\'')
			} else {
				out.WriteString(pattern[i+1 : j])
			}
			i = j + 1
			continue
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			out.WriteByte(c)
			i++
			continue
		}
		n := 1
		for i+n < len(pattern) && pattern[i+n] == c {
			n++
		}
		layout, err := javaLetter(c, n)
		if err != nil {
			return "", err
		}
		out.WriteString(layout)
		i += n
	}
	return out.String(), nil
}

// javaLetter is the Go layout of n of the pattern letter c.
func javaLetter(c byte, n int) (string, error) {
	pick := func(short, long string) string {
		if n >= 2 {
			return long
		}
		return short
	}
	switch c {
	case 'y':
		if n == 2 {
			return "06", nil
		}
		return "2006", nil
	case 'M':
		switch {
		case n >= 4:
			return "January", nil
		case n == 3:
			return "Jan", nil
		}
		return pick("1", "01"), nil
	case 'd':
		return pick("2", "02"), nil
	case 'H':
		return "15", nil
	case 'h':
		return pick("3", "03"), nil
	case 'm':
		return pick("4", "04"), nil
	case 's':
		return pick("5", "05"), nil
	case 'S':
		return strings.Repeat("0", n), nil
	case 'a':
		return "PM", nil
	case 'E':
		if n >= 4 {
			return "Monday", nil
		}
		return "Mon", nil
	case 'Z':
		return "-0700", nil
	case 'X':
		return [...]string{"Z07", "Z0700", "Z07:00"}[min(n, 3)-1], nil
	case 'z':
		return "MST", nil
	}
	return "", fmt.Errorf("the pattern letter %q is not one Causeway reads (y M d H h m s S a E Z X z)", c)
}

// timestampTypes are TimestampConverter's target types.
var timestampTypes = []string{"string", "unix", "Date", "Time", "Timestamp"}

// tsConvert is TimestampConverter: a field (or the whole key or value)
// from one of the forms of a time to another.
type tsConvert struct {
	key       bool
	field     string
	target    string
	layout    string // from format, for strings
	precision time.Duration
	schemas   *schemaCache
}

func newTimestampConverter(s settings, key bool) (Transform, error) {
	t := tsConvert{key: key, field: s.get("field"), target: s.get("target.type"), schemas: &schemaCache{}, precision: time.Millisecond}
	if !slices.Contains(timestampTypes, t.target) {
		return nil, &connect.FieldError{Field: s.key("target.type"), Reason: fmt.Sprintf("%q is not one of %s", t.target, strings.Join(timestampTypes, ", "))}
	}
	if f := s.get("format"); f != "" {
		layout, err := javaLayout(f)
		if err != nil {
			return nil, &connect.FieldError{Field: s.key("format"), Reason: err.Error()}
		}
		t.layout = layout
	} else if t.target == "string" {
		return nil, &connect.FieldError{Field: s.key("format"), Reason: "is required with target.type string"}
	}
	switch p := s.get("unix.precision"); p {
	case "", "milliseconds":
	case "seconds":
		t.precision = time.Second
	case "microseconds":
		t.precision = time.Microsecond
	case "nanoseconds":
		t.precision = time.Nanosecond
	default:
		return nil, &connect.FieldError{Field: s.key("unix.precision"), Reason: fmt.Sprintf("%q is not one of seconds, milliseconds, microseconds, nanoseconds", p)}
	}
	return t, nil
}

func (t tsConvert) Apply(r Record) (Record, error) {
	b := partOf(&r, t.key)
	if *b == nil {
		return r, nil
	}
	sp := schemaOf(&r, t.key)
	if t.field == "" {
		v, err := t.convert(*b, *sp)
		if err != nil {
			return r, err
		}
		*b = v
		*sp = t.schemas.of(*sp, func(in *connect.Schema) *connect.Schema { return t.targetSchema(in) })
		return r, nil
	}
	_, what, m, err := decodePart(&r, t.key)
	if m == nil {
		return r, err
	}
	v, ok := m[t.field]
	if !ok || string(v) == "null" {
		return r, nil
	}
	if m[t.field], err = t.convert(v, (*sp).FieldSchema(t.field)); err != nil {
		return r, fmt.Errorf("the %s's field %q: %w", what, t.field, err)
	}
	*sp = t.schemas.of(*sp, func(in *connect.Schema) *connect.Schema {
		s := *in
		s.Fields = slices.Clone(in.Fields)
		for i, f := range s.Fields {
			if f.Field == t.field {
				s.Fields[i] = *t.targetSchema(&f)
				s.Fields[i].Field = f.Field
			}
		}
		return &s
	})
	*b, err = json.Marshal(m)
	return r, err
}

// targetSchema is the schema of a converted value whose schema was in.
func (t tsConvert) targetSchema(in *connect.Schema) *connect.Schema {
	s := &connect.Schema{Optional: in != nil && in.Optional}
	switch t.target {
	case "string":
		s.Type = "string"
	case "unix":
		s.Type = "int64"
	case "Timestamp":
		s.Type, s.Name, s.Version = "int64", connect.LogicalTimestamp, 1
	case "Date":
		s.Type, s.Name, s.Version = "int32", connect.LogicalDate, 1
	case "Time":
		s.Type, s.Name, s.Version = "int32", connect.LogicalTime, 1
	}
	return s
}

// convert reads v (its schema s, when known) as a time and writes it as
// the target type. A string is read with format; a number is a Connect
// Date, Time or Timestamp when its schema says so, else a unix time at
// unix.precision.
func (t tsConvert) convert(v []byte, s *connect.Schema) ([]byte, error) {
	var at time.Time
	if v[0] == '"' {
		var text string
		if err := json.Unmarshal(v, &text); err != nil {
			return nil, err
		}
		if t.layout == "" {
			return nil, fmt.Errorf("%s is a string, and format is not given", v)
		}
		var err error
		if at, err = time.Parse(t.layout, text); err != nil {
			return nil, fmt.Errorf("%s does not match format: %w", v, err)
		}
	} else {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s is not a time", v)
		}
		switch {
		case s != nil && s.Name == connect.LogicalDate:
			at = time.Unix(n*86400, 0)
		case s != nil && (s.Name == connect.LogicalTime || s.Name == connect.LogicalTimestamp):
			at = time.UnixMilli(n)
		default:
			at = time.Unix(0, 0).Add(time.Duration(n) * t.precision)
		}
	}
	at = at.UTC()
	switch t.target {
	case "string":
		return json.Marshal(at.Format(t.layout))
	case "unix":
		return strconv.AppendInt(nil, at.UnixNano()/int64(t.precision), 10), nil
	case "Date":
		return strconv.AppendInt(nil, at.Truncate(24*time.Hour).Unix()/86400, 10), nil
	case "Time":
		midnight := at.Truncate(24 * time.Hour)
		return strconv.AppendInt(nil, at.Sub(midnight).Milliseconds(), 10), nil
	}
	return strconv.AppendInt(nil, at.UnixMilli(), 10), nil
}

// tsRouter is TimestampRouter: the topic becomes topic.format with
// ${topic} and ${timestamp}, the record's timestamp in timestamp.format.
type tsRouter struct {
	format, layout string
}

func newTimestampRouter(s settings, _ bool) (Transform, error) {
	format := s.get("topic.format")
	if format == "" {
		format = "${topic}-${timestamp}"
	}
	pattern := s.get("timestamp.format")
	if pattern == "" {
		pattern = "yyyyMMdd"
	}
	layout, err := javaLayout(pattern)
	if err != nil {
		return nil, &connect.FieldError{Field: s.key("timestamp.format"), Reason: err.Error()}
	}
	return tsRouter{format: format, layout: layout}, nil
}

func (t tsRouter) Apply(r Record) (Record, error) {
	if r.Timestamp.IsZero() {
		return r, errors.New("the record has no timestamp to route by")
	}
	r.Topic = strings.NewReplacer("${topic}", r.Topic, "${timestamp}", r.Timestamp.UTC().Format(t.layout)).Replace(t.format)
	return r, nil
}
