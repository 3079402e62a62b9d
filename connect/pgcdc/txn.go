package pgcdc

import (
	"bytes"
	"encoding/json"

	"github.com/causeway-stream/causeway/connect"
)

// txn collects the events of one source transaction (or of the snapshot)
// as records: a BEGIN event first and an END event last when
// provide.transaction.metadata is on, every record naming the
// transaction (connect.SourceRecord.Transaction), so that the runtime
// writes them in one Kafka transaction.
type txn struct {
	s    *settings
	id   string
	xid  uint32
	tsMs int64
	recs []connect.SourceRecord
	// tables are the tables written to, in the order first written, and
	// counts their events.
	tables []string
	counts map[string]int64
	// order is the number of change events so far.
	order int64
	// lastChange is the index in recs of the last change event.
	lastChange int
}

func (t *task) newTxn(id string, tsMs int64) *txn {
	x := &txn{s: t.s, id: id, tsMs: tsMs, counts: map[string]int64{}, lastChange: -1}
	if t.s.metadata {
		k, v := txnEvent("BEGIN", id, tsMs, nil, nil)
		x.recs = append(x.recs, connect.SourceRecord{Topic: t.s.txnTopic, Key: k, Value: v, KeySchema: txnKeySchema, ValueSchema: txnValSchema,
			Transaction: id})
	}
	return x
}

// change adds the event of one change to tb (op c, u, d, r or t), and
// after a delete its tombstone when tombstones.on.delete says so.
func (x *txn) change(tb *table, op string, before, after []cell, o *origin) error {
	name := tb.qualified
	if _, ok := x.counts[name]; !ok {
		x.tables = append(x.tables, name)
	}
	x.counts[name]++
	x.order++
	if x.s.metadata && o.snapshot == "false" {
		o.txn, o.order, o.tableOrder = x.id, x.order, x.counts[name]
	}
	topic := tb.topic
	if op == "t" {
		_, v, err := x.s.changeEvent(tb, op, nil, nil, o)
		if err != nil {
			return err
		}
		x.add(connect.SourceRecord{Topic: topic, Value: v, ValueSchema: tb.envelope})
		return nil
	}
	k, v, err := x.s.changeEvent(tb, op, before, after, o)
	if err != nil {
		return err
	}
	x.add(connect.SourceRecord{Topic: topic, Key: k, Value: v, KeySchema: tb.keySchema, ValueSchema: tb.envelope})
	if op == "d" && x.s.tombstones {
		x.add(connect.SourceRecord{Topic: topic, Key: k, KeySchema: tb.keySchema})
	}
	return nil
}

func (x *txn) add(r connect.SourceRecord) {
	r.Timestamp = timeOfMillis(x.tsMs)
	r.Transaction = x.id
	x.recs = append(x.recs, r)
	x.lastChange = len(x.recs) - 1
}

// markLast marks the snapshot's last change event as Debezium does
// (source.snapshot "last").
func (x *txn) markLast() {
	for i := x.lastChange; i >= 0; i-- {
		v := x.recs[i].Value
		if v == nil || x.recs[i].Topic == x.s.txnTopic {
			continue // a tombstone, or BEGIN
		}
		if j := bytes.LastIndex(v, []byte(`"snapshot":"true"`)); j >= 0 {
			x.recs[i].Value = append(append(append([]byte(nil), v[:j]...), `"snapshot":"last"`...), v[j+len(`"snapshot":"true"`):]...)
		}
		return
	}
}

// empty reports whether the transaction changed no captured table.
func (x *txn) empty() bool { return x.order == 0 }

// finish returns the transaction's records, the END event last, the
// offset after it carried by the last record before END.
func (x *txn) finish(off offset) []connect.SourceRecord {
	b, _ := json.Marshal(off)
	if x.s.metadata {
		k, v := txnEvent("END", x.id, x.tsMs, x.tables, x.counts)
		x.recs = append(x.recs, connect.SourceRecord{Topic: x.s.txnTopic, Key: k, Value: v, KeySchema: txnKeySchema, ValueSchema: txnValSchema,
			Timestamp: timeOfMillis(x.tsMs), Transaction: x.id, EndsTransaction: true})
		x.recs[len(x.recs)-2].Offset = b
	} else if len(x.recs) > 0 {
		x.recs[len(x.recs)-1].Offset = b
	}
	return x.recs
}
