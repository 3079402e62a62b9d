// Package pgcdc captures the changes of Postgres tables: a source
// connector on logical replication (the pgoutput plugin, read with
// pglogrepl), whose settings and change events are Debezium's Postgres
// connector's where the meaning is the same, so that Debezium's readers
// read its topics.
//
// A task first reads every table in the snapshot its replication slot
// exported when it was made (snapshot.mode), then streams what each
// transaction committed after that point, one topic a table
// (<topic.prefix>.<schema>.<table>), keyed by the primary key. Each poll
// returns whole source transactions: their change events, and on the
// transaction topic a BEGIN and an END event for each, the END marked as
// the record that closes its transaction (connect.SourceRecord). The
// runtime writes a poll's events with their offset (the log position
// after the last transaction) in one Kafka transaction; only once it has
// committed (connect.CommitListener) does the task tell Postgres that the
// slot may let go of that WAL, so that a task that dies resumes from the
// last committed position with nothing lost and nothing repeated.
package pgcdc

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/postgres"
)

// The source's settings, named as Debezium's Postgres connector names
// them.
const (
	Hostname              = "database.hostname"
	Port                  = "database.port"
	User                  = "database.user"
	Password              = "database.password"
	DBName                = "database.dbname"
	URL                   = "database.url"
	SlotName              = "slot.name"
	PublicationName       = "publication.name"
	PublicationAutocreate = "publication.autocreate.mode"
	PluginName            = "plugin.name"
	TableInclude          = "table.include.list"
	TableExclude          = "table.exclude.list"
	SnapshotMode          = "snapshot.mode"
	TopicPrefix           = "topic.prefix"
	HeartbeatInterval     = "heartbeat.interval.ms"
	HeartbeatQuery        = "heartbeat.action.query"
	HeartbeatTopicPrefix  = "topic.heartbeat.prefix"
	SlotDropOnStop        = "slot.drop.on.stop"
	TombstonesOnDelete    = "tombstones.on.delete"
	SkippedOperations     = "skipped.operations"
	TransactionMetadata   = "provide.transaction.metadata"
	TransactionTopic      = "topic.transaction"
	TimePrecision         = "time.precision.mode"
	DecimalHandling       = "decimal.handling.mode"
	MaxBatchSize          = "max.batch.size"
	PollInterval          = "poll.interval.ms"
	Placeholder           = "unavailable.value.placeholder"
	StatusInterval        = "status.update.interval.ms"
	SlotMaxRetries        = "slot.max.retries"
	SlotRetryDelay        = "slot.retry.delay.ms"
)

// Config describes the source's settings.
func (Source) Config() *connect.ConfigDef {
	return &connect.ConfigDef{Keys: []connect.Key{
		{Name: Hostname, Type: connect.TypeString, Importance: connect.High, Group: "Connection",
			Doc: "The database server's address (or give database.url)."},
		{Name: Port, Type: connect.TypeInt, Default: "5432", Importance: connect.High, Group: "Connection", Check: positive,
			Doc: "The database server's port."},
		{Name: User, Type: connect.TypeString, Importance: connect.High, Group: "Connection",
			Doc: "The user to connect as: one with the REPLICATION attribute (or a superuser)."},
		{Name: Password, Type: connect.TypePassword, Importance: connect.High, Group: "Connection",
			Doc: "The user's password. Never shown or logged."},
		{Name: DBName, Type: connect.TypeString, Importance: connect.High, Group: "Connection",
			Doc: "The database to capture."},
		{Name: URL, Type: connect.TypePassword, Importance: connect.High, Group: "Connection", Check: connString,
			Doc: "The database as a postgres:// URL, a JDBC URL or a libpq connection string, instead of the settings above; they override its parts when given."},
		{Name: SlotName, Type: connect.TypeString, Default: "debezium", Importance: connect.High, Group: "Replication", Check: identifier,
			Doc: "The logical replication slot the connector reads and keeps."},
		{Name: PublicationName, Type: connect.TypeString, Default: "dbz_publication", Importance: connect.High, Group: "Replication", Check: identifier,
			Doc: "The publication that says which tables' changes the slot sends."},
		{Name: PublicationAutocreate, Type: connect.TypeString, Default: "all_tables", Allowed: []string{"all_tables", "disabled", "filtered"}, FoldCase: true, Importance: connect.Medium, Group: "Replication",
			Doc: "When the publication does not exist: make it for all tables, refuse to start, or make it for the tables the include and exclude lists select (and set an existing one to them)."},
		{Name: PluginName, Type: connect.TypeString, Default: "pgoutput", Allowed: []string{"pgoutput"}, Importance: connect.Medium, Group: "Replication",
			Doc: "The logical decoding plugin: pgoutput, the one built into Postgres, is the only one served."},
		{Name: TableInclude, Type: connect.TypeList, Importance: connect.High, Group: "Filters", Check: regexps,
			Doc: "Regular expressions matched against schema.table: the tables captured (default: every table outside the system schemas)."},
		{Name: TableExclude, Type: connect.TypeList, Importance: connect.Medium, Group: "Filters", Check: regexps,
			Doc: "Regular expressions matched against schema.table: tables left out."},
		{Name: SnapshotMode, Type: connect.TypeString, Default: "initial", Allowed: []string{"initial", "never", "when_needed"}, FoldCase: true, Importance: connect.High, Group: "Snapshot",
			Doc: "initial: read the tables once, when the connector has no offset, then stream; never: stream only; when_needed: as initial, and again when the slot is gone."},
		{Name: TopicPrefix, Type: connect.TypeString, Required: true, Check: topicPart, Importance: connect.High, Group: "Connector",
			Doc: "Names the server: the topics are <prefix>.<schema>.<table>, the events' source.name is it."},
		{Name: HeartbeatInterval, Type: connect.TypeInt, Default: "0", Importance: connect.Medium, Group: "Heartbeat", Check: notNegative,
			Doc: "Milliseconds between heartbeat events (0: none). A heartbeat runs heartbeat.action.query and writes an event that carries the log position, so that the slot moves on while the captured tables are quiet."},
		{Name: HeartbeatQuery, Type: connect.TypeString, Importance: connect.Low, Group: "Heartbeat",
			Doc: "A statement run on the database at each heartbeat (an update of a heartbeat table the publication covers), to make WAL the slot reads."},
		{Name: HeartbeatTopicPrefix, Type: connect.TypeString, Default: "__debezium-heartbeat", Check: topicPart, Importance: connect.Low, Group: "Heartbeat",
			Doc: "The heartbeat topic is <this>.<topic.prefix>."},
		{Name: SlotDropOnStop, Type: connect.TypeBoolean, Default: "false", Importance: connect.Low, Group: "Replication",
			Doc: "Drop the slot when the task stops (the WAL it held is let go; the next start needs a snapshot)."},
		{Name: TombstonesOnDelete, Type: connect.TypeBoolean, Default: "true", Importance: connect.Medium, Group: "Events",
			Doc: "A delete event is followed by a tombstone of the same key, for log compaction."},
		{Name: SkippedOperations, Type: connect.TypeList, Default: "t", Importance: connect.Low, Group: "Events", Check: operations,
			Doc: "Operations not written: c (insert), u (update), d (delete), t (truncate), or none."},
		{Name: TransactionMetadata, Type: connect.TypeBoolean, Default: "true", Importance: connect.Medium, Group: "Events",
			Doc: "Write BEGIN and END events to the transaction topic, and a transaction block in each change event. Causal readers need them to take transactions whole (Debezium's default is false)."},
		{Name: TransactionTopic, Type: connect.TypeString, Default: "transaction", Check: topicPart, Importance: connect.Low, Group: "Events",
			Doc: "The transaction topic is <topic.prefix>.<this>."},
		{Name: TimePrecision, Type: connect.TypeString, Default: "adaptive", Allowed: []string{"adaptive", "connect"}, FoldCase: true, Importance: connect.Medium, Group: "Events",
			Doc: "adaptive: dates, times and timestamps in Debezium's types at the column's precision (io.debezium.time.*); connect: in Kafka Connect's Date, Time and Timestamp (milliseconds)."},
		{Name: DecimalHandling, Type: connect.TypeString, Default: "precise", Allowed: []string{"precise", "double", "string"}, FoldCase: true, Importance: connect.Medium, Group: "Events",
			Doc: "numeric columns as Connect's Decimal (exact), as double, or as text."},
		{Name: Placeholder, Type: connect.TypeString, Default: "__debezium_unavailable_value", Importance: connect.Low, Group: "Events",
			Doc: "Stands for a TOASTed value an update left unchanged, which the log does not carry."},
		{Name: MaxBatchSize, Type: connect.TypeInt, Default: "2048", Importance: connect.Low, Group: "Connector", Check: positive,
			Doc: "A poll returns once it holds this many events (whole transactions: a larger one is returned whole)."},
		{Name: StatusInterval, Type: connect.TypeInt, Default: "10000", Importance: connect.Low, Group: "Replication", Check: positive,
			Doc: "Milliseconds between two reports to the server of how far the connector has written (it lets go of the WAL before that point)."},
		{Name: SlotMaxRetries, Type: connect.TypeInt, Default: "6", Importance: connect.Low, Group: "Replication", Check: notNegative,
			Doc: "How many times a slot another process reads is looked at again before the task fails (a task that died a moment ago may still hold it)."},
		{Name: SlotRetryDelay, Type: connect.TypeInt, Default: "10000", Importance: connect.Low, Group: "Replication", Check: notNegative,
			Doc: "Milliseconds between those looks."},
		{Name: PollInterval, Type: connect.TypeInt, Default: "500", Importance: connect.Low, Group: "Connector", Check: positive,
			Doc: "The longest a poll waits for a transaction, in milliseconds."},
	}}
}

// settings are a task's settings, read.
type settings struct {
	conn                    *pgconn.Config
	dbname                  string
	slot, publication       string
	pubMode                 string
	include, exclude        []*regexp.Regexp
	snapshot                string
	prefix                  string
	heartbeat               time.Duration
	heartbeatQuery          string
	heartbeatTopic          string
	dropSlot, tombstones    bool
	skipped                 map[string]bool
	metadata                bool
	txnTopic                string
	connectTime, decimalsAs string
	placeholder             string
	maxBatch                int
	pollWait                time.Duration
	statusEvery             time.Duration
	slotRetries             int
	slotRetryDelay          time.Duration
}

// ErrNoDatabase is the error of settings that name no database.
var ErrNoDatabase = errors.New("no database: give database.url, or database.hostname and database.dbname")

func readSettings(cfg connect.Config) (*settings, error) {
	s := &settings{slot: cfg.String(SlotName), publication: cfg.String(PublicationName), pubMode: strings.ToLower(cfg.String(PublicationAutocreate)),
		snapshot: strings.ToLower(cfg.String(SnapshotMode)), prefix: cfg.String(TopicPrefix),
		heartbeat: time.Duration(cfg.Int(HeartbeatInterval)) * time.Millisecond, heartbeatQuery: cfg.String(HeartbeatQuery),
		dropSlot: cfg.Bool(SlotDropOnStop), tombstones: cfg.Bool(TombstonesOnDelete), skipped: map[string]bool{},
		metadata: cfg.Bool(TransactionMetadata), connectTime: strings.ToLower(cfg.String(TimePrecision)),
		decimalsAs: strings.ToLower(cfg.String(DecimalHandling)), placeholder: cfg.String(Placeholder),
		maxBatch: cfg.Int(MaxBatchSize), pollWait: time.Duration(cfg.Int(PollInterval)) * time.Millisecond,
		statusEvery: time.Duration(cfg.Int(StatusInterval)) * time.Millisecond,
		slotRetries: cfg.Int(SlotMaxRetries), slotRetryDelay: time.Duration(cfg.Int(SlotRetryDelay)) * time.Millisecond}
	s.heartbeatTopic = cfg.String(HeartbeatTopicPrefix) + "." + s.prefix
	s.txnTopic = s.prefix + "." + cfg.String(TransactionTopic)
	for _, op := range cfg.List(SkippedOperations) {
		if op != "none" {
			s.skipped[op] = true
		}
	}
	s.include, _ = compileAll(cfg.List(TableInclude))
	s.exclude, _ = compileAll(cfg.List(TableExclude))
	conn, err := connConfig(cfg)
	if err != nil {
		return nil, err
	}
	s.conn, s.dbname = conn, conn.Database
	return s, nil
}

// connConfig is the connection the settings give: database.url, with the
// other connection settings over its parts.
func connConfig(cfg connect.Config) (*pgconn.Config, error) {
	u := cfg.String(URL)
	if u == "" {
		if cfg.String(Hostname) == "" || cfg.String(DBName) == "" {
			return nil, &connect.FieldError{Field: Hostname, Reason: ErrNoDatabase.Error()}
		}
		u = "postgres://"
	}
	cs, err := postgres.ConnString(u)
	if err != nil {
		return nil, &connect.FieldError{Field: URL, Reason: err.Error()}
	}
	pc, err := pgconn.ParseConfig(cs)
	if err != nil {
		return nil, &connect.FieldError{Field: URL, Reason: err.Error()}
	}
	if h := cfg.String(Hostname); h != "" {
		pc.Host, pc.Port = h, uint16(cfg.Int(Port))
		pc.Fallbacks = nil
	}
	if v := cfg.String(User); v != "" {
		pc.User = v
	}
	if v := cfg.String(Password); v != "" {
		pc.Password = v
	}
	if v := cfg.String(DBName); v != "" {
		pc.Database = v
	}
	if pc.Database == "" {
		return nil, &connect.FieldError{Field: DBName, Reason: ErrNoDatabase.Error()}
	}
	// Values as the events write them: ISO dates, UTC times.
	pc.RuntimeParams["timezone"] = "UTC"
	pc.RuntimeParams["datestyle"] = "ISO"
	pc.RuntimeParams["extra_float_digits"] = "3"
	return pc, nil
}

// captured reports whether the table schema.table is captured.
func (s *settings) captured(schema, table string) bool {
	name := schema + "." + table
	if len(s.include) > 0 && !matchesAny(s.include, name) {
		return false
	}
	return !matchesAny(s.exclude, name)
}

// topic is the topic of a table's events: <prefix>.<schema>.<table>, made
// a name Kafka takes as Debezium makes it (kafkaTopicName).
func (s *settings) topic(schema, table string) string {
	return kafkaTopicName(s.prefix + "." + schema + "." + table)
}

// maxTopicName is the longest topic name Kafka takes.
const maxTopicName = 249

// kafkaTopicName is name as a Kafka topic can be named, as Debezium's
// topic naming strategies make it: each character Kafka does not allow
// in a name (all but ASCII letters, digits, '.', '_' and '-') becomes
// '_', one for each UTF-16 unit as Java counts them; a name longer than
// Kafka's limit is cut to it; "." and ".." become "_" and "__".
func kafkaTopicName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case topicChar(r):
			b.WriteRune(r)
		case r > 0xFFFF:
			b.WriteString("__")
		default:
			b.WriteByte('_')
		}
	}
	out := b.String()
	switch {
	case len(out) > maxTopicName:
		out = out[:maxTopicName]
	case out == ".":
		out = "_"
	case out == "..":
		out = "__"
	}
	return out
}

func topicChar(r rune) bool {
	return r == '.' || r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// topicPart checks a setting that names topics in part: Kafka's
// characters only.
func topicPart(v string) error {
	for _, r := range v {
		if !topicChar(r) {
			return fmt.Errorf("%q is not a character of a Kafka topic's name (letters, digits, '.', '_' and '-')", r)
		}
	}
	return nil
}

func matchesAny(res []*regexp.Regexp, name string) bool {
	for _, re := range res {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// compileAll compiles each expression to match a whole name, as
// Debezium's lists do.
func compileAll(exprs []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(exprs))
	for _, e := range exprs {
		re, err := regexp.Compile("^(?:" + e + ")$")
		if err != nil {
			return nil, fmt.Errorf("%q: %w", e, err)
		}
		out = append(out, re)
	}
	return out, nil
}

func regexps(v string) error {
	_, err := compileAll(connect.SplitList(v))
	return err
}

func connString(v string) error {
	cs, err := postgres.ConnString(v)
	if err != nil {
		return err
	}
	_, err = pgconn.ParseConfig(cs)
	return err
}

// identifier checks a slot's or publication's name: Postgres takes lower
// case letters, digits and underscores for a slot.
var identifierRE = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

func identifier(v string) error {
	if !identifierRE.MatchString(v) {
		return errors.New("must be 1 to 63 lower case letters, digits or underscores")
	}
	return nil
}

func operations(v string) error {
	for _, op := range connect.SplitList(v) {
		switch op {
		case "c", "u", "d", "t", "none":
		default:
			return fmt.Errorf("%q is not an operation: give c, u, d, t or none", op)
		}
	}
	return nil
}

func positive(v string) error {
	if !strings.HasPrefix(v, "-") && v != "0" {
		return nil
	}
	return errors.New("must be at least 1")
}

func notNegative(v string) error {
	if strings.HasPrefix(v, "-") {
		return errors.New("must be at least 0")
	}
	return nil
}
