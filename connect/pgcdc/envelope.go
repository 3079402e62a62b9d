package pgcdc

import (
	"fmt"
	"strconv"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/internal/jsontext"
)

// cell is one column's value in a row as the log or the snapshot gives
// it: null, a TOASTed value left unchanged (not in the log), or text.
type cell struct {
	kind byte // 'n', 'u' or 't', as pgoutput's tuple data says
	text []byte
}

// origin is where an event came from: its source block.
type origin struct {
	// tsMs is when the transaction committed (the snapshot: when it was
	// read).
	tsMs     int64
	snapshot string // "true", "last" or "false"
	txID     uint32
	// lsn is the log position of the change (the snapshot's: the slot's
	// consistent point).
	lsn uint64
	// txn is the transaction's id as events name it (txId:lsn), and
	// order and tableOrder the event's place in it.
	txn               string
	order, tableOrder int64
}

// prepare makes the schemas of t's events.
func (s *settings) prepare(t *table) {
	t.topic, t.qualified = s.topic(t.schema, t.name), t.schema+"."+t.name
	// The schemas are named by the table as it is, not by its topic's
	// name, as Debezium names them.
	base := s.prefix + "." + t.schema + "." + t.name
	t.keySchema = &connect.Schema{Type: "struct", Name: base + ".Key"}
	t.valueSchema = &connect.Schema{Type: "struct", Name: base + ".Value", Optional: true}
	for _, c := range t.columns {
		f := s.fieldSchema(c)
		t.valueSchema.Fields = append(t.valueSchema.Fields, f)
		if c.key {
			t.keySchema.Fields = append(t.keySchema.Fields, f)
		}
	}
	before, after := *t.valueSchema, *t.valueSchema
	before.Field, after.Field = "before", "after"
	fields := []connect.Schema{before, after, sourceSchema(), {Type: "string", Field: "op"}, {Type: "int64", Optional: true, Field: "ts_ms"}}
	if s.metadata {
		fields = append(fields, blockSchema())
	}
	t.envelope = &connect.Schema{Type: "struct", Name: base + ".Envelope", Version: 1, Fields: fields}
}

// sourceSchema is the schema of an event's source block, Debezium's
// io.debezium.connector.postgresql.Source.
func sourceSchema() connect.Schema {
	str := func(name string) connect.Schema { return connect.Schema{Type: "string", Field: name} }
	optInt := func(name string) connect.Schema { return connect.Schema{Type: "int64", Optional: true, Field: name} }
	return connect.Schema{Type: "struct", Name: "io.debezium.connector.postgresql.Source", Field: "source", Fields: []connect.Schema{
		str("version"), str("connector"), str("name"), {Type: "int64", Field: "ts_ms"},
		{Type: "string", Optional: true, Name: "io.debezium.data.Enum", Version: 1, Parameters: map[string]string{"allowed": "true,last,false,incremental"}, Default: []byte(`"false"`), Field: "snapshot"},
		str("db"), {Type: "string", Optional: true, Field: "sequence"}, str("schema"), str("table"),
		optInt("txId"), optInt("lsn"), optInt("xmin"),
	}}
}

// blockSchema is the schema of an event's transaction block.
func blockSchema() connect.Schema {
	return connect.Schema{Type: "struct", Name: "event.block", Version: 1, Optional: true, Field: "transaction", Fields: []connect.Schema{
		{Type: "string", Field: "id"}, {Type: "int64", Field: "total_order"}, {Type: "int64", Field: "data_collection_order"},
	}}
}

// changeEvent is an event's key and value payloads (schemaless JSON).
func (s *settings) changeEvent(t *table, op string, before, after []cell, o *origin) (key, value []byte, err error) {
	keyRow := after
	if keyRow == nil {
		keyRow = before
	}
	if key, err = s.appendRow(nil, t, keyRow, true); err != nil {
		return nil, nil, err
	}
	v := append(make([]byte, 0, max(256, t.valueCap)), `{"before":`...)
	if v, err = s.appendRowOrNull(v, t, before); err != nil {
		return nil, nil, err
	}
	v = append(v, `,"after":`...)
	if v, err = s.appendRowOrNull(v, t, after); err != nil {
		return nil, nil, err
	}
	v = append(v, `,"source":`...)
	v = s.appendSource(v, t, o)
	v = append(v, `,"op":`...)
	v = jsontext.AppendString(v, op)
	v = append(v, `,"ts_ms":`...)
	v = strconv.AppendInt(v, o.tsMs, 10)
	if s.metadata {
		v = appendBlock(v, o)
	}
	v = append(v, '}')
	t.valueCap = min(max(t.valueCap, len(v)), maxValueCap)
	return key, v, nil
}

// maxValueCap bounds the room an event value is given before it is
// written (table.valueCap): a table's one large row does not make all
// its events that large.
const maxValueCap = 16 << 10

func (s *settings) appendRowOrNull(b []byte, t *table, row []cell) ([]byte, error) {
	if row == nil {
		return append(b, "null"...), nil
	}
	return s.appendRow(b, t, row, false)
}

// appendRow appends row as a JSON object: all its columns, or its key's.
func (s *settings) appendRow(b []byte, t *table, row []cell, keyOnly bool) ([]byte, error) {
	b = append(b, '{')
	first := true
	for i, c := range t.columns {
		if keyOnly && !c.key {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = jsontext.AppendString(b, c.name)
		b = append(b, ':')
		f := &t.valueSchema.Fields[i]
		var err error
		switch {
		case i >= len(row) || row[i].kind == 'n':
			b = append(b, "null"...)
		case row[i].kind == 'u':
			b = s.appendPlaceholder(b, f)
		default:
			if b, err = s.appendValue(b, c, f, row[i].text); err != nil {
				return nil, fmt.Errorf("%s.%s column %s: %w", t.schema, t.name, c.name, err)
			}
		}
	}
	return append(b, '}'), nil
}

// appendPlaceholder writes what stands for a TOASTed value the log does
// not hold: the placeholder, as text or as its bytes; null for types that
// cannot hold it, as Debezium does.
func (s *settings) appendPlaceholder(b []byte, f *connect.Schema) []byte {
	switch {
	case f.Type == "string" && f.Name != debeziumZonedTS:
		return jsontext.AppendString(b, s.placeholder)
	case f.Type == "bytes" && f.Name == "":
		return jsontext.AppendString(b, base64Of(s.placeholder))
	}
	return append(b, "null"...)
}

func (s *settings) appendSource(b []byte, t *table, o *origin) []byte {
	b = append(b, `{"version":"causeway","connector":"postgresql","name":`...)
	b = jsontext.AppendString(b, s.prefix)
	b = append(b, `,"ts_ms":`...)
	b = strconv.AppendInt(b, o.tsMs, 10)
	b = append(b, `,"snapshot":`...)
	b = jsontext.AppendString(b, o.snapshot)
	b = append(b, `,"db":`...)
	b = jsontext.AppendString(b, s.dbname)
	b = append(b, `,"sequence":null,"schema":`...)
	b = jsontext.AppendString(b, t.schema)
	b = append(b, `,"table":`...)
	b = jsontext.AppendString(b, t.name)
	b = append(b, `,"txId":`...)
	if o.txID == 0 {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendUint(b, uint64(o.txID), 10)
	}
	b = append(b, `,"lsn":`...)
	b = strconv.AppendUint(b, o.lsn, 10)
	return append(b, `,"xmin":null}`...)
}

func appendBlock(b []byte, o *origin) []byte {
	if o.txn == "" {
		return append(b, `,"transaction":null`...)
	}
	b = append(b, `,"transaction":{"id":`...)
	b = jsontext.AppendString(b, o.txn)
	b = append(b, `,"total_order":`...)
	b = strconv.AppendInt(b, o.order, 10)
	b = append(b, `,"data_collection_order":`...)
	b = strconv.AppendInt(b, o.tableOrder, 10)
	return append(b, '}')
}

// The schemas of the transaction topic's events, Debezium's.
var (
	txnKeySchema = &connect.Schema{Type: "struct", Name: "io.debezium.connector.common.TransactionMetadataKey", Fields: []connect.Schema{{Type: "string", Field: "id"}}}
	txnValSchema = &connect.Schema{Type: "struct", Name: "io.debezium.connector.common.TransactionMetadataValue", Fields: []connect.Schema{
		{Type: "string", Field: "status"}, {Type: "string", Field: "id"}, {Type: "int64", Optional: true, Field: "event_count"},
		{Type: "array", Optional: true, Field: "data_collections", Items: &connect.Schema{Type: "struct", Name: "event.collection", Fields: []connect.Schema{
			{Type: "string", Field: "data_collection"}, {Type: "int64", Field: "event_count"}}}},
		{Type: "int64", Field: "ts_ms"},
	}}
	heartbeatKeySchema = &connect.Schema{Type: "struct", Name: "io.debezium.connector.common.ServerNameKey", Fields: []connect.Schema{{Type: "string", Field: "serverName"}}}
	heartbeatValSchema = &connect.Schema{Type: "struct", Name: "io.debezium.connector.common.Heartbeat", Fields: []connect.Schema{{Type: "int64", Field: "ts_ms"}}}
)

// txnEvent is a BEGIN or END event's key and value. counts, for an END,
// are the events of each table (schema.table) in the order first seen.
func txnEvent(status, id string, tsMs int64, tables []string, counts map[string]int64) (key, value []byte) {
	key = append(jsontext.AppendString([]byte(`{"id":`), id), '}')
	v := jsontext.AppendString([]byte(`{"status":`), status)
	v = append(v, `,"id":`...)
	v = jsontext.AppendString(v, id)
	if status == "BEGIN" {
		v = append(v, `,"event_count":null,"data_collections":null`...)
	} else {
		var total int64
		for _, t := range tables {
			total += counts[t]
		}
		v = append(v, `,"event_count":`...)
		v = strconv.AppendInt(v, total, 10)
		v = append(v, `,"data_collections":[`...)
		for i, t := range tables {
			if i > 0 {
				v = append(v, ',')
			}
			v = append(v, `{"data_collection":`...)
			v = jsontext.AppendString(v, t)
			v = append(v, `,"event_count":`...)
			v = strconv.AppendInt(v, counts[t], 10)
			v = append(v, '}')
		}
		v = append(v, ']')
	}
	v = append(v, `,"ts_ms":`...)
	v = strconv.AppendInt(v, tsMs, 10)
	return key, append(v, '}')
}
