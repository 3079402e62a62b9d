package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/causeway-stream/causeway/connect"
)

// The settings of the source, named as Confluent's JDBC source names
// them.
const (
	TableWhitelist  = "table.whitelist"
	IncrementingCol = "incrementing.column.name"
	TopicPrefix     = "topic.prefix"
	PollInterval    = "poll.interval.ms"
	BatchMaxRows    = "batch.max.rows"
)

// Source is the query-based Postgres source: it reads the rows of tables
// whose incrementing column (a serial id) passed the last one read, and
// writes each table's rows to the topic named topic.prefix + table, as
// JSON objects (row_to_json), without a key (add one with the ValueToKey
// transform, as with Confluent's JDBC source).
//
// Every poll reads all the tables in one REPEATABLE READ snapshot, in the
// order table.whitelist lists them. List parents before their children:
// then a child row the snapshot holds has its parent in the same
// snapshot (the database checked the foreign key when the child
// committed), read and handed over before it, and the session clock the
// runtime stamps makes every gate downstream keep that order.
//
// Like the JDBC source's incrementing mode, a row whose id was drawn
// before another's but committed after it is missed when the later one is
// read first; ids drawn and committed in order (one writer, or writers
// that commit in the order they insert) are all read.
type Source struct{}

var _ connect.Source = Source{}

// Config describes the source's settings.
func (Source) Config() *connect.ConfigDef {
	return &connect.ConfigDef{Keys: append(connectionKeys("The database to read from"), []connect.Key{
		{Name: TableWhitelist, Type: connect.TypeList, Required: true, Importance: connect.High, Group: "Tables",
			Doc: "The tables to read, parents before children."},
		{Name: IncrementingCol, Type: connect.TypeString, Default: "id", Importance: connect.High, Group: "Mode",
			Doc: "The strictly increasing column (a serial or identity) that tells the new rows of every table."},
		{Name: TopicPrefix, Type: connect.TypeString, Importance: connect.High, Group: "Connector",
			Doc: "Prefixed to a table's name to make its topic."},
		{Name: PollInterval, Type: connect.TypeInt, Default: "1000", Importance: connect.High, Group: "Connector",
			Doc: "How long to wait between polls that found nothing, in milliseconds.", Check: positive},
		{Name: BatchMaxRows, Type: connect.TypeInt, Default: "1000", Importance: connect.Low, Group: "Connector",
			Doc: "The most rows read from one table in one poll.", Check: positive},
	}...)}
}

// positive checks a whole number setting is at least 1.
func positive(v string) error {
	if v == "0" || strings.HasPrefix(v, "-") {
		return errors.New("must be at least 1")
	}
	return nil
}

// Open connects to the database and checks that every table exists and
// has the incrementing column.
func (Source) Open(ctx context.Context, connector string, cfg connect.Config) (connect.SourceTask, error) {
	pool, err := connectPool(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := &sourceTask{pool: pool, column: cfg.String(IncrementingCol), prefix: cfg.String(TopicPrefix),
		interval: time.Duration(cfg.Int(PollInterval)) * time.Millisecond, limit: cfg.Int(BatchMaxRows)}
	for _, name := range cfg.List(TableWhitelist) {
		var ok bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = $2 AND NOT attisdropped)`,
			identifier(name).Sanitize(), s.column).Scan(&ok)
		if err == nil && !ok {
			err = fmt.Errorf("%s does not exist or has no column %q (%s)", identifier(name).Sanitize(), s.column, IncrementingCol)
		}
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("table %q: %w", name, err)
		}
		s.tables = append(s.tables, name)
	}
	return s, nil
}

// sourceTask is the source's one task.
type sourceTask struct {
	pool     *pgxpool.Pool
	tables   []string
	column   string
	prefix   string
	interval time.Duration
	limit    int
	// quiet is set after a poll found nothing: the next waits first.
	quiet bool
}

// sourceOffset is the source's position: the last id read of each table.
type sourceOffset struct {
	Tables map[string]int64 `json:"tables"`
}

// Poll reads, in one snapshot, the rows of every table past the last id
// offset holds, in the order of table.whitelist, then of ids.
func (s *sourceTask) Poll(ctx context.Context, offset []byte) ([]connect.SourceRecord, error) {
	if s.quiet {
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(s.interval):
		}
	}
	off := sourceOffset{Tables: map[string]int64{}}
	if offset != nil {
		if err := json.Unmarshal(offset, &off); err != nil {
			return nil, fmt.Errorf("the committed offset %q is not the source's: %w", offset, err)
		}
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("poll: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read only: nothing to keep
	var out []connect.SourceRecord
	for _, name := range s.tables {
		col := pgx.Identifier{s.column}.Sanitize()
		rows, err := tx.Query(ctx, `SELECT `+col+`::bigint, row_to_json(t)::text FROM (SELECT * FROM `+identifier(name).Sanitize()+
			` WHERE `+col+` > $1::bigint ORDER BY `+col+` LIMIT $2) t`, lastOr(off.Tables, name), s.limit)
		if err != nil {
			return nil, fmt.Errorf("poll %s: %w", name, err)
		}
		for rows.Next() {
			var id int64
			var value string
			if err := rows.Scan(&id, &value); err != nil {
				rows.Close()
				return nil, fmt.Errorf("poll %s: %w", name, err)
			}
			off.Tables[name] = id
			at, err := json.Marshal(off)
			if err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, connect.SourceRecord{Topic: s.prefix + name, Value: []byte(value), Timestamp: time.Now(), Offset: at})
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("poll %s: %w", name, err)
		}
	}
	s.quiet = len(out) == 0
	return out, nil
}

// lastOr is the last id read of a table, or -1 << 62 before any.
func lastOr(m map[string]int64, table string) int64 {
	if v, ok := m[table]; ok {
		return v
	}
	return -1 << 62
}

// Close closes the task's connections.
func (s *sourceTask) Close() error {
	s.pool.Close()
	return nil
}
