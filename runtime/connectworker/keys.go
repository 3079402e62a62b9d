package connectworker

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/causeway-stream/causeway/connect"
)

// frameworkRule is how the worker takes one of Kafka Connect's own
// connector settings that commonDef does not define: with a check of its
// value when it works here, or refused with why when it does not.
type frameworkRule struct {
	// name is the setting's name, or a prefix of names when it ends in
	// a dot.
	name  string
	check func(v string) error
	// why is the reason a setting without a check is refused.
	why string
}

// frameworkRules are Kafka Connect's settings besides commonDef's, by name.
var frameworkRules = []frameworkRule{
	{name: "config.action.reload", check: oneOf("restart", "none")},
	{name: "errors.retry.timeout", check: only("0", "converters and transforms are not retried: a record they refuse goes by errors.tolerance at once")},
	{name: "errors.retry.delay.max.ms", check: wholeNumber},
	{name: "errors.log.enable", check: oneOf("true", "false")},
	{name: "errors.log.include.messages", check: only("false", "records' contents are never logged")},
	{name: "errors.deadletterqueue.topic.replication.factor", check: only("-1", "the dead-letter topic is made with the broker's default replication factor: give -1")},
	{name: keyContextHeaders, check: oneOf("true", "false")},
	{name: "topic.creation.", why: "sinks make no topics (a sink waits for a topic that does not exist yet)"},
	{name: "header.converter", check: only("org.apache.kafka.connect.storage.SimpleHeaderConverter", "headers pass as they are, as SimpleHeaderConverter's")},
	{name: "header.converter.", why: "headers pass as they are; the header converter has no settings"},
	{name: "consumer.override.", why: "per-connector client settings are not supported: give them to the worker (--kafka)"},
	{name: "producer.override.", why: "per-connector client settings are not supported: give them to the worker (--kafka)"},
	{name: "admin.override.", why: "per-connector client settings are not supported: give them to the worker (--kafka)"},
	{name: "exactly.once.support", check: oneOf("requested", "required")},
	{name: "transaction.boundary", check: only("poll", "a source's transaction is what one poll returned")},
	{name: "offsets.storage.topic", why: "sources keep their offsets in the worker's --offsets-topic"},
}

// ruleFor is the rule of the setting name, nil when no rule names it.
func ruleFor(name string) *frameworkRule {
	for i := range frameworkRules {
		r := &frameworkRules[i]
		if r.name == name || (strings.HasSuffix(r.name, ".") && strings.HasPrefix(name, r.name)) {
			return r
		}
	}
	return nil
}

// keyErrors checks every setting of cfg that neither the plugin's
// definition nor commonDef holds: one of Kafka Connect's own is checked
// or refused by its rule, a converter's or transform's is checked where
// those are, and any other is flagged as unknown (a typo, most likely),
// which Kafka Connect does not do.
func keyErrors(cfg map[string]string, source bool, defs ...*connect.ConfigDef) []*connect.FieldError {
	var out []*connect.FieldError
	for _, name := range sortedKeys(cfg) {
		if slices.ContainsFunc(defs, func(d *connect.ConfigDef) bool { return knownKey(d, name) }) ||
			strings.HasPrefix(name, keyTransforms+".") || (source && strings.HasPrefix(name, "topic.creation.")) || name == "predicates" || strings.HasPrefix(name, "predicates.") ||
			strings.HasPrefix(name, keyKeyConverter+".") || strings.HasPrefix(name, keyValueConverter+".") {
			continue
		}
		r := ruleFor(name)
		switch {
		case r == nil:
			out = append(out, &connect.FieldError{Field: name, Reason: "is not a setting of this connector's plugin nor of Kafka Connect's connectors (a misspelt name?)"})
		case r.check == nil:
			out = append(out, &connect.FieldError{Field: name, Reason: "is not supported: " + r.why})
		default:
			if err := r.check(cfg[name]); err != nil {
				out = append(out, &connect.FieldError{Field: name, Reason: err.Error()})
			}
		}
	}
	return out
}

func sortedKeys(cfg map[string]string) []string {
	out := make([]string, 0, len(cfg))
	for k := range cfg {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// oneOf checks that a value is one of values.
func oneOf(values ...string) func(string) error {
	return func(v string) error {
		if !slices.Contains(values, v) {
			return fmt.Errorf("%q is not one of %s", v, strings.Join(values, ", "))
		}
		return nil
	}
}

// only checks that a value is the one served, saying why.
func only(value, why string) func(string) error {
	return func(v string) error {
		if v != value {
			return fmt.Errorf("only %q is served: %s", value, why)
		}
		return nil
	}
}

func wholeNumber(v string) error {
	if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 {
		return errors.New("must be a whole number, at least 0")
	}
	return nil
}
