package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/causeway-stream/causeway/connect"
)

// evolved is a topic's table and a schema whose fields it has columns
// for (auto.evolve), once checked.
type evolved struct {
	topic  string
	schema *connect.Schema
}

// querier is what describe reads with: the pool, or the open transaction
// once it has made or changed a table.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ensureTables makes the tables recs need and lacks (auto.create) and adds
// the columns their schemas have and the tables lack (auto.evolve), in the
// open transaction, before any row of recs is written: the DDL commits or
// aborts with the rows. An advisory lock on the table's name makes tasks
// that change one table take turns. Its error is the task's: the table
// cannot take the records.
func (t *task) ensureTables(ctx context.Context, recs []connect.Record) error {
	for _, r := range recs {
		if err := t.ensureTable(ctx, r); err != nil {
			return fmt.Errorf("%s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
	}
	return nil
}

func (t *task) ensureTable(ctx context.Context, r connect.Record) error {
	topic := r.Topic
	if t.stale[topic] {
		// An aborted transaction made or changed it: read it again.
		tb, err := t.describeTopic(ctx, t.pool, topic)
		if err != nil {
			return err
		}
		t.tables[topic], t.stale[topic] = tb, false
	}
	tb, known := t.tables[topic]
	if !known {
		// A topic a transform named (RegexRouter), or whose table was
		// missing when the task opened.
		var err error
		if tb, err = t.describeTopic(ctx, t.pool, topic); err != nil {
			return err
		}
		t.tables[topic] = tb
	}
	if tb == nil {
		if r.Value == nil {
			return nil // a tombstone: deleting from no table is refused later
		}
		return t.createTable(ctx, r)
	}
	if !t.s.evolve || r.ValueSchema == nil || r.Value == nil {
		return nil
	}
	seen := evolved{topic: topic, schema: r.ValueSchema}
	if t.evolved[seen] {
		return nil // this schema's columns are there
	}
	var adds []string
	for i := range r.ValueSchema.Fields {
		f := &r.ValueSchema.Fields[i]
		if tb.columns[f.Field] || (t.s.fields != nil && !t.s.fields[f.Field]) {
			continue
		}
		if !f.Optional && f.Default == nil {
			return fmt.Errorf("%s lacks the column of field %q, which auto.evolve cannot add: the field is neither optional nor has a default", tb.name.Sanitize(), f.Field)
		}
		def, err := t.columnDef(f.Field, f)
		if err != nil {
			return err
		}
		adds = append(adds, "ADD COLUMN IF NOT EXISTS "+def)
	}
	if len(adds) == 0 {
		if len(t.evolved) >= 1000 {
			clear(t.evolved)
		}
		t.evolved[seen] = true
		return nil
	}
	return t.ddl(ctx, topic, tb.name, "ALTER TABLE "+tb.name.Sanitize()+" "+strings.Join(adds, ", "))
}

// createTable makes the table of r's topic from r's schemas, its primary
// key as pk.mode says.
func (t *task) createTable(ctx context.Context, r connect.Record) error {
	name := t.tableName(r.Topic)
	if !t.s.create {
		return fmt.Errorf("%s does not exist (set auto.create to make it)", name.Sanitize())
	}
	vs := r.ValueSchema
	if vs == nil || vs.Type != "struct" {
		return errNoSchema
	}
	pk, keySchemas, err := t.newKey(r)
	if err != nil {
		return err
	}
	var cols []string
	seen := map[string]bool{}
	add := func(field string, s *connect.Schema) error {
		if seen[field] {
			return nil
		}
		seen[field] = true
		def, err := t.columnDef(field, s)
		cols = append(cols, def)
		return err
	}
	for i, s := range keySchemas {
		if err := add(pk[i], s); err != nil {
			return err
		}
	}
	for i := range vs.Fields {
		f := &vs.Fields[i]
		if t.s.fields != nil && !t.s.fields[f.Field] && !slices.Contains(pk, f.Field) {
			continue
		}
		s := f
		if slices.Contains(pk, f.Field) && f.Optional {
			c := *f
			c.Optional = false // a key column is NOT NULL
			s = &c
		}
		if err := add(f.Field, s); err != nil {
			return err
		}
	}
	if len(pk) > 0 {
		quoted := make([]string, len(pk))
		for i, c := range pk {
			quoted[i] = quoteIdent(c)
		}
		cols = append(cols, "PRIMARY KEY ("+strings.Join(quoted, ", ")+")")
	}
	return t.ddl(ctx, r.Topic, name, "CREATE TABLE IF NOT EXISTS "+name.Sanitize()+" (\n\t"+strings.Join(cols, ",\n\t")+")")
}

// newKey is the primary key of the table auto.create makes for r: its
// columns, and the schemas of those that do not come from the value's
// fields (none with pk.mode record_value).
func (t *task) newKey(r connect.Record) ([]string, []*connect.Schema, error) {
	var pk []string
	var schemas []*connect.Schema
	column := func(name string, s *connect.Schema) {
		pk = append(pk, name)
		schemas = append(schemas, &connect.Schema{Type: s.Type, Name: s.Name, Parameters: s.Parameters, Items: s.Items})
	}
	switch t.s.pkMode {
	case "kafka":
		for i, typ := range []string{"string", "int32", "int64"} {
			column(t.s.pkFields[i], &connect.Schema{Type: typ})
		}
	case "record_key":
		ks := r.KeySchema
		switch {
		case ks == nil:
			return nil, nil, errors.New("auto.create with pk.mode record_key needs the key's schema: set key.converter (the JsonConverter with schemas, or a primitive converter)")
		case ks.Type == "struct":
			for i := range ks.Fields {
				if f := &ks.Fields[i]; len(t.s.pkFields) == 0 || slices.Contains(t.s.pkFields, f.Field) {
					column(f.Field, f)
				}
			}
		case len(t.s.pkFields) != 1:
			return nil, nil, fmt.Errorf("the key is a single %s: name its column in pk.fields", ks.Type)
		default:
			column(t.s.pkFields[0], ks)
		}
	case "record_value":
		for i := range r.ValueSchema.Fields {
			if f := r.ValueSchema.Fields[i].Field; len(t.s.pkFields) == 0 || slices.Contains(t.s.pkFields, f) {
				pk = append(pk, f)
			}
		}
	}
	return pk, schemas, nil
}

// ddl runs one statement that makes or changes the table of topic in the
// open transaction, then reads the table again from there.
func (t *task) ddl(ctx context.Context, topic string, name pgx.Identifier, sql string) error {
	if _, err := t.tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, name.Sanitize()); err != nil {
		return err
	}
	if _, err := t.tx.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	t.changed = append(t.changed, topic)
	clear(t.evolved)
	tb, err := t.describeTopic(ctx, t.tx, topic)
	if err != nil {
		return err
	}
	t.tables[topic] = tb
	return nil
}

// forgetChanges marks the tables the open transaction made or changed to
// be read again, when it is rolled back.
func (t *task) forgetChanges() {
	for _, topic := range t.changed {
		t.stale[topic] = true
	}
	t.changed = nil
	clear(t.evolved)
}

// tableName is the table of topic.
func (t *task) tableName(topic string) pgx.Identifier {
	return identifier(strings.ReplaceAll(t.s.tableFmt, "${topic}", topic))
}

// describeTopic reads the table of topic: nil when it does not exist and
// auto.create may make it.
func (t *task) describeTopic(ctx context.Context, q querier, topic string) (*table, error) {
	tb, err := t.describe(ctx, q, t.tableName(topic))
	switch {
	case errors.Is(err, errMissing) && t.s.create:
		return nil, nil
	case errors.Is(err, errMissing):
		return nil, fmt.Errorf("table of topic %q: %s %w (set auto.create to make it)", topic, t.tableName(topic).Sanitize(), errMissing)
	}
	if err != nil {
		return nil, fmt.Errorf("table of topic %q: %w", topic, err)
	}
	return tb, nil
}
