package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/causeway-stream/causeway/connect"
)

// The sink's settings, named as Confluent's JDBC sink names them.
const (
	ConnectionURL      = "connection.url"
	ConnectionUser     = "connection.user"
	ConnectionPassword = "connection.password"
	ConnectionAttempts = "connection.attempts"
	ConnectionBackoff  = "connection.backoff.ms"
	DialectName        = "dialect.name"
	InsertMode         = "insert.mode"
	PKMode             = "pk.mode"
	PKFields           = "pk.fields"
	FieldsWhitelist    = "fields.whitelist"
	DeleteEnabled      = "delete.enabled"
	TableNameFormat    = "table.name.format"
	TableTypes         = "table.types"
	BatchSize          = "batch.size"
	AutoCreate         = "auto.create"
	AutoEvolve         = "auto.evolve"
	QuoteIdentifiers   = "quote.sql.identifiers"
	DBTimezone         = "db.timezone"
	DBTimezoneDate     = "db.timezone.date"
	TrimSensitiveLog   = "trim.sensitive.log"
	MSSQLHoldlock      = "mssql.use.merge.holdlock"
	PositionsTable     = "positions.table"
)

// connectionKeys are the settings of a connection, the sink's and the
// source's.
func connectionKeys(doc string) []connect.Key {
	return []connect.Key{
		{Name: ConnectionURL, Type: connect.TypePassword, Required: true, Importance: connect.High, Group: "Connection",
			Doc: doc + ", as a JDBC URL (jdbc:postgresql://host:port/db?user=...), a postgres:// URL or a libpq connection string.",
			Check: func(v string) error {
				_, err := poolConfig(v, "", "")
				return err
			}},
		{Name: ConnectionUser, Type: connect.TypeString, Importance: connect.High, Group: "Connection",
			Doc: "The user to connect as; overrides the URL's."},
		{Name: ConnectionPassword, Type: connect.TypePassword, Importance: connect.High, Group: "Connection",
			Doc: "The user's password; overrides the URL's. Never shown or logged."},
		{Name: ConnectionAttempts, Type: connect.TypeInt, Default: "3", Importance: connect.Low, Group: "Connection", Check: positive,
			Doc: "How many times connecting is tried when the task starts."},
		{Name: ConnectionBackoff, Type: connect.TypeInt, Default: "10000", Importance: connect.Low, Group: "Connection", Check: notNegative,
			Doc: "Milliseconds between those tries."},
		{Name: DialectName, Type: connect.TypeString, Importance: connect.Low, Group: "Connection",
			Allowed: []string{"PostgreSqlDatabaseDialect"},
			Doc:     "The database's dialect: empty, or PostgreSqlDatabaseDialect, the only one served."},
	}
}

// Config describes the plugin's settings.
func (Sink) Config() *connect.ConfigDef {
	keys := connectionKeys("The database to write to")
	keys = append(keys,
		connect.Key{Name: InsertMode, Type: connect.TypeString, Default: "insert", Allowed: []string{"insert", "upsert", "update"}, FoldCase: true, Importance: connect.High, Group: "Writes",
			Doc: "insert: a row whose key exists is refused; upsert: it is updated (INSERT ... ON CONFLICT DO UPDATE); update: only existing rows are updated, a missing one is left out."},
		connect.Key{Name: BatchSize, Type: connect.TypeInt, Default: "3000", Importance: connect.Medium, Group: "Writes", Check: positive,
			Doc: "The most rows sent to the database in one round trip."},
		connect.Key{Name: DeleteEnabled, Type: connect.TypeBoolean, Default: "false", Importance: connect.Medium, Group: "Writes",
			Doc: "A tombstone (a record without a value) deletes the row of its key; needs pk.mode record_key."},
		connect.Key{Name: TableNameFormat, Type: connect.TypeString, Default: "${topic}", Importance: connect.Medium, Group: "Data Mapping",
			Doc: "The table a topic is written to; ${topic} stands for the topic's name."},
		connect.Key{Name: TableTypes, Type: connect.TypeList, Default: "TABLE", Importance: connect.Low, Group: "Data Mapping", Check: tableTypes,
			Doc: "What the sink may write to: TABLE, PARTITIONED_TABLE, VIEW."},
		connect.Key{Name: PKMode, Type: connect.TypeString, Default: "none", Allowed: []string{"none", "kafka", "record_key", "record_value"}, FoldCase: true, Importance: connect.High, Group: "Data Mapping",
			Doc: "Where the primary key comes from: nowhere, the record's topic, partition and offset, its key, or fields of its value."},
		connect.Key{Name: PKFields, Type: connect.TypeList, Importance: connect.Medium, Group: "Data Mapping",
			Doc: "The primary key's columns. kafka: three names (default __connect_topic,__connect_partition,__connect_offset); record_key: the key's fields, one name for a key that is one value; record_value: the value's fields (default: the table's primary key, or every field for a table auto.create makes)."},
		connect.Key{Name: FieldsWhitelist, Type: connect.TypeList, Importance: connect.Medium, Group: "Data Mapping",
			Doc: "The value's fields to write, besides the key's; empty: all."},
		connect.Key{Name: DBTimezone, Type: connect.TypeString, Default: "UTC", Importance: connect.Medium, Group: "Data Mapping", Check: zone,
			Doc: "The time zone timestamps are written in: a timestamp column holds the wall time there, a timestamptz column the instant."},
		connect.Key{Name: DBTimezoneDate, Type: connect.TypeString, Default: "NONE", Allowed: []string{"NONE", "UTC"}, FoldCase: true, Importance: connect.Low, Group: "Data Mapping",
			Doc: "A Connect Date is written as the calendar day it names, in either case (the JDBC driver's NONE may shift it by db.timezone; here it never does)."},
		connect.Key{Name: AutoCreate, Type: connect.TypeBoolean, Default: "false", Importance: connect.Medium, Group: "DDL Support",
			Doc: "Make a missing table (CREATE TABLE) from the record's schema, its primary key from pk.mode."},
		connect.Key{Name: AutoEvolve, Type: connect.TypeBoolean, Default: "false", Importance: connect.Medium, Group: "DDL Support",
			Doc: "Add a column a record's schema has and the table lacks (ALTER TABLE ADD COLUMN); the field must be optional or have a default."},
		connect.Key{Name: QuoteIdentifiers, Type: connect.TypeString, Default: "always", Importance: connect.Medium, Group: "DDL Support",
			Check: func(v string) error {
				if v != "always" {
					return errors.New(`only "always" is served: names are quoted, so a field's name is its column's name as written`)
				}
				return nil
			},
			Doc: "always: table and column names are quoted."},
		connect.Key{Name: TrimSensitiveLog, Type: connect.TypeBoolean, Default: "false", Importance: connect.Low, Group: "Writes",
			Doc: "A row the database refuses is reported by its SQLSTATE and constraint only, not the database's message, which may quote its values."},
		connect.Key{Name: MSSQLHoldlock, Type: connect.TypeBoolean, Default: "true", Importance: connect.Low, Group: "Writes",
			Doc: "SQL Server only; has no meaning for PostgreSQL."},
		connect.Key{Name: PositionsTable, Type: connect.TypeString, Default: "causeway_sink_positions", Importance: connect.Low, Group: "Exactly once",
			Doc: "The table the sink keeps its positions in (connector, topic, partition, next offset); made when missing."})
	return &connect.ConfigDef{Keys: keys}
}

func notNegative(v string) error {
	if strings.HasPrefix(v, "-") {
		return errors.New("may not be negative")
	}
	return nil
}

func tableTypes(v string) error {
	for _, t := range connect.SplitList(v) {
		if t != "TABLE" && t != "PARTITIONED_TABLE" && t != "VIEW" {
			return fmt.Errorf("%q is not one of TABLE, PARTITIONED_TABLE, VIEW", t)
		}
	}
	return nil
}

func zone(v string) error {
	_, err := time.LoadLocation(v)
	return err
}

// settings are the plugin's settings, parsed.
type settings struct {
	mode      string // insert, upsert or update
	upsert    bool
	pkMode    string
	pkFields  []string
	fields    map[string]bool // fields.whitelist; nil: all
	deletes   bool
	tableFmt  string
	kinds     []string // pg_class relkinds table.types allows
	batch     int
	create    bool
	evolve    bool
	zone      *time.Location
	trim      bool
	positions pgx.Identifier
}

// kafkaPK are pk.mode kafka's default column names.
var kafkaPK = []string{"__connect_topic", "__connect_partition", "__connect_offset"}

func parse(cfg connect.Config) (settings, error) {
	s := settings{mode: strings.ToLower(cfg.String(InsertMode)), pkMode: strings.ToLower(cfg.String(PKMode)), pkFields: cfg.List(PKFields),
		deletes: cfg.Bool(DeleteEnabled), tableFmt: cfg.String(TableNameFormat), batch: cfg.Int(BatchSize),
		create: cfg.Bool(AutoCreate), evolve: cfg.Bool(AutoEvolve), trim: cfg.Bool(TrimSensitiveLog),
		positions: identifier(cfg.String(PositionsTable))}
	s.upsert = s.mode == "upsert"
	s.zone, _ = time.LoadLocation(cfg.String(DBTimezone)) // Parse checked it
	if wl := cfg.List(FieldsWhitelist); len(wl) > 0 {
		s.fields = map[string]bool{}
		for _, f := range wl {
			s.fields[f] = true
		}
	}
	for _, t := range cfg.List(TableTypes) {
		s.kinds = append(s.kinds, map[string][]string{"TABLE": {"r"}, "PARTITIONED_TABLE": {"p"}, "VIEW": {"v"}}[t]...)
	}
	if s.pkMode == "kafka" && len(s.pkFields) == 0 {
		s.pkFields = kafkaPK
	}
	switch {
	case s.pkMode == "kafka" && len(s.pkFields) != 3:
		return s, &connect.FieldError{Field: PKFields, Reason: "needs three names with pk.mode kafka: the topic's, the partition's and the offset's columns"}
	case s.deletes && s.pkMode != "record_key":
		return s, &connect.FieldError{Field: DeleteEnabled, Reason: "needs pk.mode record_key: a tombstone has only its key"}
	case s.mode != "insert" && s.pkMode == "none":
		return s, &connect.FieldError{Field: InsertMode, Reason: s.mode + " needs a primary key (pk.mode kafka, record_key or record_value)"}
	}
	return s, nil
}

// ConnString is the connection string pgx reads for u: a postgres:// URL
// or a libpq connection string as it is, and a JDBC URL read as the
// PostgreSQL JDBC driver reads it:
// jdbc:postgresql://host[:port][,host2...]/database?user=..&password=..,
// its other parameters passed on as the server's (sslmode and the like).
func ConnString(u string) (string, error) {
	rest, ok := strings.CutPrefix(u, "jdbc:")
	if !ok {
		return u, nil
	}
	if !strings.HasPrefix(rest, "postgresql:") {
		return "", errors.New("only PostgreSQL is served: a JDBC URL must start with jdbc:postgresql")
	}
	parsed, err := url.Parse(rest)
	if err != nil {
		return "", fmt.Errorf("not a JDBC URL: %w", err)
	}
	parsed.Scheme = "postgres"
	q := parsed.Query()
	if v := q.Get("user"); v != "" {
		parsed.User = url.UserPassword(v, q.Get("password"))
		if q.Get("password") == "" {
			parsed.User = url.User(v)
		}
	}
	q.Del("user")
	q.Del("password")
	parsed.RawQuery = q.Encode()
	return parsed.String(), nil
}

// poolConfig is the pool of the connection.url u (ConnString), with user
// and password when given.
func poolConfig(u, user, password string) (*pgxpool.Config, error) {
	u, err := ConnString(u)
	if err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(u)
	if err != nil {
		return nil, err
	}
	if user != "" {
		pc.ConnConfig.User = user
	}
	if password != "" {
		pc.ConnConfig.Password = password
	}
	return pc, nil
}

// connectPool connects with the connection settings of cfg, trying
// connection.attempts times, connection.backoff.ms apart.
func connectPool(ctx context.Context, cfg connect.Config) (*pgxpool.Pool, error) {
	pc, err := poolConfig(cfg.String(ConnectionURL), cfg.String(ConnectionUser), cfg.String(ConnectionPassword))
	if err != nil {
		return nil, err
	}
	attempts := max(cfg.Int(ConnectionAttempts), 1)
	backoff := time.Duration(cfg.Int(ConnectionBackoff)) * time.Millisecond
	for i := 1; ; i++ {
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err == nil {
			if err = pool.Ping(ctx); err == nil {
				return pool, nil
			}
			pool.Close()
		}
		if i >= attempts {
			return nil, fmt.Errorf("connect to postgres (%d attempts): %w", i, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
	}
}
