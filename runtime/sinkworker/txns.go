package sinkworker

import (
	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/framework"
)

// txnTracker follows the source transactions among the records the gate
// delivers (Config.TransactionTopic): which are begun and not yet ended,
// and how many pending records make whole transactions. With the gate, a
// transaction's end comes after all its records, and the records a
// source wrote after an end come after that end: the open transactions
// run out between two of the source's writes at least.
type txnTracker struct {
	// topic is the transaction topic; "" when transactions are not
	// followed.
	topic string
	// begun are the transactions with records delivered and no end yet.
	begun map[string]struct{}
	// cut is how many pending records came before the last moment no
	// transaction was open.
	cut int
}

func newTxnTracker(topic string) txnTracker {
	return txnTracker{topic: topic, begun: map[string]struct{}{}}
}

// take notes a delivered record: a record of the transaction topic is
// marked not to write, and ends its transaction when it is the end; a
// record of a transaction begins it.
func (t *txnTracker) take(h *held) {
	if t.topic == "" {
		return
	}
	if h.rec.Topic == t.topic {
		h.meta = true
		if id, ok := header(h.rec, connect.TxnEndHeader); ok {
			delete(t.begun, id)
		}
		return
	}
	if id, ok := header(h.rec, connect.TxnHeader); ok {
		t.begun[id] = struct{}{}
	}
}

// taken notes that n records are pending, the last just taken.
func (t *txnTracker) taken(n int) {
	if len(t.begun) == 0 {
		t.cut = n
	}
}

// open reports whether a transaction is begun and not ended.
func (t *txnTracker) open() bool { return len(t.begun) > 0 }

// whole is the pending records that make whole transactions.
func (t *txnTracker) whole(pending []held) []held { return pending[:t.cut:t.cut] }

// handedOn notes that the whole transactions went to a commit: what is
// left pending begins with an open one.
func (t *txnTracker) handedOn() { t.cut = 0 }

func header(r connect.Record, key string) (string, bool) {
	v, ok := framework.Record{Headers: r.Headers}.Header(key)
	return string(v), ok
}

// moves are the positions to commit with every pending record: past
// everything the gate has accounted for.
func (a *assignment) moves() []connect.Move {
	var moves []connect.Move
	for _, e := range a.node.Committable() {
		if from, mine := a.own[e.Channel]; mine && e.Offset != from {
			moves = append(moves, connect.Move{Channel: e.Channel, From: from, To: e.Offset})
		}
	}
	return moves
}

// movesAfter are the positions to commit with recs, a prefix of the
// pending records: past the last of them on each channel, and no
// further, for the records after them are not written yet.
func (a *assignment) movesAfter(recs []held) []connect.Move {
	next := map[int]int64{}
	var chans []connect.Move
	for _, h := range recs {
		ch := h.rec.Channel()
		from, mine := a.own[ch]
		if !mine {
			continue
		}
		i, seen := -1, false
		for j := range chans {
			if chans[j].Channel == ch {
				i, seen = j, true
				break
			}
		}
		if !seen {
			chans = append(chans, connect.Move{Channel: ch, From: from})
			i = len(chans) - 1
		}
		next[i] = h.rec.Offset + 1
	}
	moves := chans[:0]
	for i, m := range chans {
		if m.To = next[i]; m.To > m.From {
			moves = append(moves, m)
		}
	}
	return moves
}
