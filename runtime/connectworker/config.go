package connectworker

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/convert"
	"github.com/causeway-stream/causeway/connect/transform"
)

// The settings every connector takes besides its plugin's, named as
// Kafka Connect names them.
const (
	keyName           = "name"
	keyClass          = "connector.class"
	keyTasksMax       = "tasks.max"
	keyTopics         = "topics"
	keyTopicsRegex    = "topics.regex"
	keyTolerance      = "errors.tolerance"
	keyDeadLetter     = "errors.deadletterqueue.topic.name"
	keyContextHeaders = "errors.deadletterqueue.context.headers.enable"
	keyTransforms     = "transforms"
	keyGate           = "causal.gate"
	keyTxnTopic       = "causal.transaction.topic"
	keyPartitions     = "topic.creation.default.partitions"
	keyMaxRetries     = "max.retries"
	keyRetryBackoff   = "retry.backoff.ms"
)

// pluginKind is a plugin's type, as /connector-plugins names it.
type pluginKind string

const (
	kindSink   pluginKind = "sink"
	kindSource pluginKind = "source"
)

// plugin is a connector class the worker has.
type plugin struct {
	class  string
	kind   pluginKind
	sink   connect.Sink
	source connect.Source
	// http marks the built-in HTTP source, which has no task to poll.
	http bool
}

func (p plugin) def() *connect.ConfigDef {
	switch {
	case p.sink != nil:
		return p.sink.Config()
	case p.source != nil:
		return p.source.Config()
	default:
		return httpSourceConfig()
	}
}

// commonDef is the settings of every connector of a kind.
func commonDef(kind pluginKind) *connect.ConfigDef {
	keys := []connect.Key{
		{Name: keyName, Type: connect.TypeString, Required: true, Importance: connect.High, Group: "Common",
			Doc: "The connector's name, unique in the cluster.", Check: checkName},
		{Name: keyClass, Type: connect.TypeString, Required: true, Importance: connect.High, Group: "Common",
			Doc: "The connector's plugin, as GET /connector-plugins names it."},
		{Name: keyTasksMax, Type: connect.TypeInt, Default: "1", Importance: connect.High, Group: "Common",
			Doc: "The most tasks the connector runs, at most one per worker.", Check: atLeastOne},
		{Name: keyTransforms, Type: connect.TypeList, Importance: connect.Low, Group: "Transforms",
			Doc: "Aliases of the transforms to apply, in order (transforms.<alias>.type and its settings)."},
		{Name: keyValueConverter, Type: connect.TypeString, Default: convert.JSON, Importance: connect.Low, Group: "Common",
			Allowed: convert.Classes,
			Doc:     "How record values are read (value.converter.* are its settings): JSON, with or without schemas, strings, bytes, numbers, or Avro through a Schema Registry (value.converter.schema.registry.url)."},
		{Name: keyKeyConverter, Type: connect.TypeString, Importance: connect.Low, Group: "Common",
			Allowed: convert.Classes, Doc: keyConverterDoc},
		{Name: keyTolerance, Type: connect.TypeString, Default: "none", Allowed: []string{"none", "all"}, Importance: connect.Medium, Group: "Error Handling",
			Doc: "none: the first record that cannot be written fails the task; all: it is skipped (sinks: sent to the dead-letter topic)."},
	}
	switch kind {
	case kindSink:
		keys = append(keys,
			connect.Key{Name: keyTopics, Type: connect.TypeList, Required: true, Importance: connect.High, Group: "Common",
				Doc: "The topics to write."},
			connect.Key{Name: keyDeadLetter, Type: connect.TypeString, Importance: connect.Medium, Group: "Error Handling",
				Doc: "Where records the sink's system refuses go, with errors.tolerance all."},
			connect.Key{Name: keyGate, Type: connect.TypeBoolean, Default: "true", Importance: connect.Low, Group: "Causal",
				Doc: "Write a record only after what its clock claims. false only to see what the gate prevents."},
			connect.Key{Name: keyTxnTopic, Type: connect.TypeString, Importance: connect.Medium, Group: "Causal",
				Doc: "The topic where the source writes its transactions' BEGIN and END events (Debezium's <topic.prefix>.transaction), listed in topics: none of its records is written, and the sink commits only where every source transaction it has begun is ended, so that each lands whole in one transaction of the database. Needs tasks.max=1 and the gate."},
			connect.Key{Name: keyMaxRetries, Type: connect.TypeInt, Default: "10", Importance: connect.Medium, Group: "Retries",
				Doc: "How many times a write that failed on a transient error of the sink's system (connection lost, server restarting) is tried again before the task fails, as Confluent's JDBC sink's max.retries.", Check: notNegative},
			connect.Key{Name: keyRetryBackoff, Type: connect.TypeInt, Default: "3000", Importance: connect.Medium, Group: "Retries",
				Doc: "Milliseconds to wait before each retry (retry.backoff.ms).", Check: notNegative})
	case kindSource:
		keys = append(keys,
			connect.Key{Name: keyPartitions, Type: connect.TypeInt, Default: "1", Importance: connect.Low, Group: "Topic Creation",
				Doc: "Partitions of a topic the source makes when it writes to one that does not exist.", Check: atLeastOne})
	}
	return &connect.ConfigDef{Keys: keys}
}

func checkName(v string) error {
	if strings.ContainsAny(v, "/?#%") || strings.TrimSpace(v) != v {
		return errors.New("may not hold /, ?, #, % or surrounding spaces")
	}
	return nil
}

func notNegative(v string) error {
	if strings.HasPrefix(v, "-") {
		return errors.New("may not be negative")
	}
	return nil
}

func atLeastOne(v string) error {
	if v == "0" || strings.HasPrefix(v, "-") {
		return errors.New("must be at least 1")
	}
	return nil
}

// validation is what validating a connector's settings found: Kafka
// Connect's ConfigInfos, less its layout.
type validation struct {
	plugin plugin
	common connect.Validation
	own    connect.Validation
	// extra are errors of settings no definition holds (the transforms').
	extra []*connect.FieldError
}

func (v validation) errorCount() int { return v.common.ErrorCount + v.own.ErrorCount + len(v.extra) }

// errs lists every error, each naming its setting.
func (v validation) errs() []string {
	var out []string
	for _, val := range append(slices.Clone(v.common.Values), v.own.Values...) {
		for _, e := range val.Errors {
			out = append(out, (&connect.FieldError{Field: val.Key.Name, Reason: e}).Error())
		}
	}
	for _, e := range v.extra {
		out = append(out, e.Error())
	}
	return out
}

// validate checks cfg against the plugin it names, the settings of every
// connector of its kind, and its transforms.
func (w *Worker) validate(cfg map[string]string) (validation, error) {
	p, ok := w.pluginOf(cfg[keyClass])
	if !ok {
		return validation{}, fmt.Errorf("%w: %q (the worker has %s)", errUnknownPlugin, cfg[keyClass], strings.Join(slices.Sorted(maps.Keys(w.plugins)), ", "))
	}
	common, own := commonDef(p.kind), p.def()
	v := validation{plugin: p, common: common.Validate(cfg), own: own.Validate(cfg)}
	v.extra = append(v.extra, keyErrors(cfg, p.kind == kindSource, common, own)...)
	if p.kind == kindSource {
		_, errs := parseTopicCreation(cfg)
		v.extra = append(v.extra, errs...)
	}
	if _, err := transform.Parse(cfg); err != nil {
		v.extra = append(v.extra, fieldErrors(err)...)
	}
	if cfg[keyTolerance] == "all" && p.kind == kindSink && cfg[keyDeadLetter] == "" {
		v.extra = append(v.extra, &connect.FieldError{Field: keyDeadLetter, Reason: "is required with errors.tolerance all: refused records go there"})
	}
	if _, set := cfg[keyTopicsRegex]; set && p.kind == kindSink {
		// Refused by name rather than ignored: a sink given only a pattern
		// would read nothing, and one given both would read less than its
		// user meant.
		v.extra = append(v.extra, &connect.FieldError{Field: keyTopicsRegex, Reason: "is not supported: name the topics in " + keyTopics})
	}
	if t, set := cfg[keyTxnTopic]; set && p.kind == kindSink {
		v.extra = append(v.extra, txnTopicErrors(t, cfg)...)
	}
	v.extra = append(v.extra, converterErrors(cfg, p.kind, p.http)...)
	return v, nil
}

// txnTopicErrors checks causal.transaction.topic: among the topics, one
// task (which reads every channel, the ends' and their transactions'),
// and the gate on.
func txnTopicErrors(topic string, cfg map[string]string) []*connect.FieldError {
	var out []*connect.FieldError
	if !slices.Contains(connect.SplitList(cfg[keyTopics]), topic) {
		out = append(out, &connect.FieldError{Field: keyTxnTopic, Reason: fmt.Sprintf("%q is not among the topics: list it in %s", topic, keyTopics)})
	}
	if n, ok := cfg[keyTasksMax]; ok && n != "1" {
		out = append(out, &connect.FieldError{Field: keyTxnTopic, Reason: "needs tasks.max=1: a transaction is written whole by the task that reads all its records"})
	}
	if cfg[keyGate] == "false" {
		out = append(out, &connect.FieldError{Field: keyTxnTopic, Reason: "needs the gate (causal.gate=true): without it an end may come before its transaction"})
	}
	return out
}

// fieldErrors unwraps the field errors joined in err.
func fieldErrors(err error) []*connect.FieldError {
	var out []*connect.FieldError
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, fieldErrors(e)...)
		}
		return out
	}
	var fe *connect.FieldError
	if errors.As(err, &fe) {
		return []*connect.FieldError{fe}
	}
	return []*connect.FieldError{{Field: keyTransforms, Reason: err.Error()}}
}

var errUnknownPlugin = errors.New("no such connector plugin")

// JDBCSinkClass is Confluent's JDBC sink connector's class, which the
// worker's PostgresSink serves for PostgreSQL: its settings are the JDBC
// sink's, and a connection.url of another database is refused by name.
const JDBCSinkClass = "io.confluent.connect.jdbc.JdbcSinkConnector"

// classAliases are connector classes of other projects that a plugin of
// the worker serves, by the plugin's class.
var classAliases = map[string]string{JDBCSinkClass: "PostgresSink", "JdbcSinkConnector": "PostgresSink",
	DebeziumPostgresClass: "PostgresCdcSource", "PostgresConnector": "PostgresCdcSource"}

// DebeziumPostgresClass is Debezium's Postgres connector's class, served
// by the plugin named PostgresCdcSource (package connect/pgcdc).
const DebeziumPostgresClass = "io.debezium.connector.postgresql.PostgresConnector"

// pluginOf is the plugin that serves class: its own, or the one its alias
// names.
func (w *Worker) pluginOf(class string) (plugin, bool) {
	if p, ok := w.plugins[class]; ok {
		return p, true
	}
	p, ok := w.plugins[classAliases[class]]
	return p, ok
}
