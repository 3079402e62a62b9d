package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/causeway-stream/causeway/connect/internal/jsonscan"
)

// appendCopyRow appends the JSON object doc, with the key's columns, as
// one row of COPY's text format, its fields in the order of cols (sorted;
// doc and key name each of them, the key's and then the last of a
// repeated field winning, as json_populate_record reads them). Each value is given as Postgres's input function for its column
// would read it from json_populate_record: a string's text, a number or
// boolean as written, an object or array as its JSON text, null (or a
// field the row leaves out) as NULL.
func appendCopyRow(dst, doc []byte, key map[string]json.RawMessage, cols []string, vals [][]byte) ([]byte, error) {
	clear(vals)
	err := jsonscan.EachField(doc, func(name string, v []byte) {
		if i, ok := slices.BinarySearch(cols, name); ok {
			vals[i] = v
		}
	})
	if err != nil {
		return dst, err
	}
	for name, v := range key { // the key's columns win over the value's
		if i, ok := slices.BinarySearch(cols, name); ok {
			vals[i] = v
		}
	}
	for i, v := range vals {
		if i > 0 {
			dst = append(dst, '\t')
		}
		switch {
		case v == nil || string(v) == "null":
			// A column the row leaves out (a field of its schema the
			// payload omits) is NULL, as json_populate_record gives it.
			dst = append(dst, '\\', 'N')
		case v[0] == '"':
			s, err := jsonString(v)
			if err != nil {
				return dst, err
			}
			dst = appendCopyText(dst, s)
		default:
			dst = appendCopyText(dst, v)
		}
	}
	return append(dst, '\n'), nil
}

// jsonString is the text of the JSON string v.
func jsonString(v []byte) ([]byte, error) {
	if !slices.Contains(v[1:len(v)-1], '\\') {
		return v[1 : len(v)-1], nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, errors.New("a string value is not valid JSON")
	}
	return []byte(s), nil
}

// appendCopyText appends b escaped for COPY's text format.
func appendCopyText(dst, b []byte) []byte {
	for _, c := range b {
		switch c {
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// write sends stmts in order: runs of rows for COPY by COPY, the others
// in batches of statements between them.
func (t *task) write(ctx context.Context, stmts []statement) error {
	b := &pgx.Batch{}
	send := func() error {
		if b.Len() == 0 {
			return nil
		}
		err := t.tx.SendBatch(ctx, b).Close()
		b = &pgx.Batch{}
		return err
	}
	for _, st := range stmts {
		if st.run == nil {
			b.Queue(st.sql, st.args...)
			continue
		}
		if err := send(); err != nil {
			return err
		}
		if err := t.copyRun(ctx, st); err != nil {
			return err
		}
	}
	return send()
}

// errNotCopied is a run of rows that could not be put in COPY's format:
// they go again one at a time, for the database to name the one at fault.
var errNotCopied = errors.New("a row could not be written for COPY")

// copyRun writes a run of rows for one table and columns with COPY, in
// its text format: the fastest way into Postgres, and the same values
// json_populate_record would give.
func (t *task) copyRun(ctx context.Context, st statement) error {
	cols := strings.Split(st.cols, ",")
	vals := make([][]byte, len(cols))
	buf := t.copyBuf[:0]
	for _, r := range st.run {
		var err error
		if buf, err = appendCopyRow(buf, r.value, r.key, cols, vals); err != nil {
			return fmt.Errorf("%w: %v", errNotCopied, err)
		}
	}
	t.copyBuf = buf
	sql, ok := st.tb.sql[st.cols+"/copy"]
	if !ok {
		quoted := make([]string, len(cols))
		for i, c := range cols {
			quoted[i] = pgx.Identifier{c}.Sanitize()
		}
		sql = "COPY " + st.tb.name.Sanitize() + " (" + strings.Join(quoted, ",") + ") FROM STDIN"
		st.tb.sql[st.cols+"/copy"] = sql
	}
	_, err := t.tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(buf), sql)
	return err
}

// copyMin is the shortest run of rows written with COPY rather than a
// statement.
const copyMin = 16

// group joins each run of consecutive inserts into the same table and
// columns: a long one is written with COPY (in insert mode), the others
// in one statement over a JSON array of their rows
// (json_populate_recordset); either keeps their order. An upsert's run
// ends before a key it holds comes again (one statement cannot change a
// row twice), so that rows changed many times in a commit (a hot stock
// row) do not send the batch one row at a time. The other statements
// stay as they are.
func (t *task) group(stmts []statement) []statement {
	out := make([]statement, 0, len(stmts))
	var keys map[string]bool
	for i := 0; i < len(stmts); {
		st := stmts[i]
		j := i + 1
		if t.s.upsert && st.insert {
			keys = map[string]bool{keyOf(st): true}
		}
		for st.insert && j < len(stmts) && stmts[j].insert && stmts[j].tb == st.tb && stmts[j].cols == st.cols {
			if t.s.upsert {
				k := keyOf(stmts[j])
				if keys[k] {
					break
				}
				keys[k] = true
			}
			j++
		}
		if j-i == 1 {
			out = append(out, t.materialize(st))
			i = j
			continue
		}
		if !t.s.upsert && j-i >= copyMin {
			out = append(out, statement{tb: st.tb, cols: st.cols, run: stmts[i:j]})
			i = j
			continue
		}
		for k := i; k < j; k++ {
			stmts[k] = t.materialize(stmts[k])
		}
		size := 2
		for _, r := range stmts[i:j] {
			size += len(r.doc) + 1
		}
		arr := make([]byte, 0, size)
		arr = append(arr, '[')
		for k, r := range stmts[i:j] {
			if k > 0 {
				arr = append(arr, ',')
			}
			arr = append(arr, r.doc...)
		}
		arr = append(arr, ']')
		out = append(out, statement{sql: t.insertSQL(st.tb, strings.Split(st.cols, ","), true), args: []any{string(arr)}})
		i = j
	}
	return out
}

// keyOf is an insert's key, as one string.
func keyOf(st statement) string {
	var b strings.Builder
	for _, c := range st.tb.pk {
		b.Write(st.key[c])
		b.WriteByte(0)
	}
	return b.String()
}
