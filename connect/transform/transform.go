// Package transform is Causeway's single message transforms: Apache
// Kafka's, configured as Kafka Connect configures them, on JSON keys and
// values and, when the converter read one, their Connect schemas, which a
// transform changes as it changes the data.
//
//	"transforms": "key,drop",
//	"transforms.key.type": "org.apache.kafka.connect.transforms.ValueToKey",
//	"transforms.key.fields": "id",
//	"transforms.drop.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
//	"transforms.drop.exclude": "internal_note",
//
// The types, with or without Kafka Connect's package prefix, each $Key or
// $Value where Kafka Connect has both:
//
//   - ReplaceField: exclude (or blacklist), include (or whitelist),
//     renames (old:new pairs).
//   - ValueToKey: fields: the key becomes an object of these fields of the
//     value.
//   - ExtractField: field: the key (or value) becomes that field's value.
//   - HoistField: field: the key (or value) becomes an object of one
//     field holding it.
//   - InsertField: topic.field, partition.field, offset.field,
//     timestamp.field, static.field with static.value.
//   - MaskField: fields, replacement: the fields become their type's
//     empty value (0, false, "") or the replacement.
//   - Cast: spec (field:type pairs, or one type for the whole): int8 to
//     float64, boolean, string.
//   - Flatten: delimiter: nested objects become fields named by their path.
//   - TimestampConverter: field, target.type (string, unix, Date, Time,
//     Timestamp), format (a java.text.SimpleDateFormat pattern),
//     unix.precision.
//   - RegexRouter: regex, replacement: a topic the regular expression
//     matches whole is renamed ($1 names a group, as in Java).
//   - TimestampRouter: topic.format with ${topic} and ${timestamp},
//     timestamp.format.
//   - Filter: drops every record (a predicate says which).
//   - DropHeaders: headers; InsertHeader: header, value.literal;
//     HeaderFrom: fields, headers, operation (copy or move).
//
// Debezium's io.debezium.transforms.ExtractNewRecordState is served too:
// delete.handling.mode (drop, none, rewrite) and drop.tombstones.
//
// A transform applies to a record its predicate (transforms.<alias>.predicate,
// negated by .negate) matches: predicates.<name>.type is
// TopicNameMatches (pattern), HasHeaderKey (name) or RecordIsTombstone.
//
// A record whose key or value a transform needs as an object and is not
// one fails with an error naming the transform; a tombstone (no value)
// passes value transforms unchanged. A record Filter drops comes back
// with connect.ErrFiltered.
package transform

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/framework"
)

// Record is what a transform sees of a record.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	// Key and Value are JSON; Value is nil for a tombstone.
	Key, Value []byte
	// KeySchema and ValueSchema are their Connect schemas, nil when the
	// converter read none.
	KeySchema, ValueSchema *connect.Schema
	Headers                []framework.Header
}

// Transform changes one record.
type Transform interface {
	Apply(r Record) (Record, error)
}

// Chain is the transforms of a connector, in order.
type Chain struct {
	steps []step
}

type step struct {
	alias string
	t     Transform
	// when, if set, says which records t applies to.
	when   predicate
	negate bool
}

// Apply runs r through every transform of c, in order. Its error names the
// transform that failed.
func (c *Chain) Apply(r Record) (Record, error) {
	for _, s := range c.steps {
		if s.when != nil && s.when.test(r) == s.negate {
			continue
		}
		var err error
		if r, err = s.t.Apply(r); err != nil {
			return r, fmt.Errorf("transform %q: %w", s.alias, err)
		}
	}
	return r, nil
}

// Empty reports whether c has no transforms.
func (c *Chain) Empty() bool { return c == nil || len(c.steps) == 0 }

// Routes reports whether a transform of c can change a record's topic.
func (c *Chain) Routes() bool {
	return c != nil && slices.ContainsFunc(c.steps, func(s step) bool {
		switch s.t.(type) {
		case router, tsRouter:
			return true
		}
		return false
	})
}

const prefix = "org.apache.kafka.connect.transforms."

// Parse makes the chain the connector settings cfg name under
// "transforms". Every error is a *connect.FieldError naming the setting
// that is wrong.
func Parse(cfg map[string]string) (*Chain, error) {
	c := &Chain{}
	var errs []error
	preds, perrs := parsePredicates(cfg)
	errs = append(errs, perrs...)
	for _, alias := range connect.SplitList(cfg["transforms"]) {
		s := settings{cfg: cfg, prefix: "transforms." + alias + "."}
		typ := strings.TrimPrefix(s.get("type"), prefix)
		make, known := makers[typ]
		var t Transform
		var err error
		switch {
		case typ == "":
			err = s.missing("type")
		case !known:
			err = &connect.FieldError{Field: s.key("type"), Reason: fmt.Sprintf("%q is not a transform Causeway has (%s)", s.get("type"), strings.Join(slices.Sorted(maps.Keys(makers)), ", "))}
		default:
			t, err = make(s, strings.HasSuffix(typ, "$Key"))
		}
		st := step{alias: alias, t: t, negate: s.get("negate") == "true"}
		if name := s.get("predicate"); name != "" {
			if st.when = preds[name]; st.when == nil {
				err = errors.Join(err, &connect.FieldError{Field: s.key("predicate"), Reason: fmt.Sprintf("%q is not in predicates", name)})
			}
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.steps = append(c.steps, st)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// settings are one transform's (or predicate's) settings.
type settings struct {
	cfg    map[string]string
	prefix string
}

func (s settings) key(name string) string { return s.prefix + name }
func (s settings) get(name string) string { return s.cfg[s.prefix+name] }
func (s settings) list(name string) []string {
	return connect.SplitList(s.get(name))
}
func (s settings) missing(name string) error {
	return &connect.FieldError{Field: s.key(name), Reason: "is required"}
}

// maker makes a transform from its settings; key: the $Key variant.
type maker func(s settings, key bool) (Transform, error)

// makers are the transforms by type.
var makers = map[string]maker{}

func init() {
	for _, part := range []string{"$Key", "$Value"} {
		makers["ReplaceField"+part] = newReplace
		makers["ExtractField"+part] = newExtract
		makers["HoistField"+part] = newHoist
		makers["InsertField"+part] = newInsert
		makers["MaskField"+part] = newMask
		makers["Cast"+part] = newCast
		makers["Flatten"+part] = newFlatten
		makers["TimestampConverter"+part] = newTimestampConverter
	}
	makers["ValueToKey"] = newValueToKey
	makers["RegexRouter"] = newRouter
	makers["TimestampRouter"] = newTimestampRouter
	makers["Filter"] = func(settings, bool) (Transform, error) { return filter{}, nil }
	makers["DropHeaders"] = newDropHeaders
	makers["InsertHeader"] = newInsertHeader
	makers["HeaderFrom$Key"] = newHeaderFrom
	makers["HeaderFrom$Value"] = newHeaderFrom
	makers[ExtractNewRecordState] = newNewRecordState
}

// decodePart decodes the key (or value) of r as a JSON object, and
// returns it with where it lies and its name; m is nil when r has none (a
// tombstone's value), or on an error.
func decodePart(r *Record, key bool) (b *[]byte, what string, m map[string]json.RawMessage, err error) {
	b, what = partOf(r, key), "value"
	if key {
		what = "key"
	}
	if *b == nil {
		return b, what, nil, nil
	}
	m, err = object(*b, what)
	return b, what, m, err
}

// object decodes b as a JSON object, keeping each field's bytes.
func object(b []byte, what string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, fmt.Errorf("the record's %s is not a JSON object", what)
	}
	return m, nil
}
