package txn

import (
	"hash/maphash"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// refusals learns which records the broker refused after they were sent.
// A client learns that the broker refused a record too large for its
// topic, or one it finds invalid, only from that record's outcome, and the
// whole transaction fails with it. While all goes well the producer keeps
// no outcomes (librdkafka's delivery reports each cost a call across cgo).
// So after a transaction fails, the next ones are watched (the client's
// Watch), and a record refused for good is remembered. When it is sent
// again, its error comes back at once, for the caller's error policy, and
// the transaction can commit without it.
//
// This relies on processors emitting the same record again when they
// process the same input again, as deterministic processors do. A processor
// that puts the time or a random number into its output defeats it: its
// refused output keeps failing transactions, and the worker keeps reporting
// that in /status and /readyz.
//
//causeway:owned
type refusals struct {
	log *zap.Logger
	// known holds the refused records, by fingerprint, with their errors
	// and when they were learned.
	known map[fingerprint]refusal
	seed  maphash.Seed
	// commits counts the commits that went through.
	commits uint64
}

// refusal is a refused record's error, and the count of commits when it
// was learned.
type refusal struct {
	err     error
	learned uint64
}

// keepCommits is how many commits a refusal is remembered for. Not only
// until the next: a transaction without the refused record may commit
// before its sender, rebuilt from committed state, sends it again (on a
// loaded machine it did), and forgetting it then costs another failed
// transaction. A record the broker would take by now (its topic's limit
// raised) is sent to it again once the refusal is forgotten.
const keepCommits = 64

// fingerprint names a record by where it goes and what it holds.
type fingerprint struct {
	topic      string
	partition  int32
	key, value uint64
}

func newRefusals(log *zap.Logger) *refusals {
	return &refusals{log: log, known: map[fingerprint]refusal{}, seed: maphash.MakeSeed()}
}

func (r *refusals) fingerprintOf(topic string, partition int32, key, value []byte) fingerprint {
	return fingerprint{topic: topic, partition: partition, key: maphash.Bytes(r.seed, key), value: maphash.Bytes(r.seed, value)}
}

// refused returns the error the broker refused a record with before, if
// it did.
func (r *refusals) refused(topic string, partition int32, key, value []byte) (error, bool) {
	if len(r.known) == 0 {
		return nil, false
	}
	k, ok := r.known[r.fingerprintOf(topic, partition, key, value)]
	return k.err, ok
}

// transactionFailed learns the refusals among the records of a watched
// transaction that failed, and watches the next.
func (r *refusals) transactionFailed(client transport.Producer) {
	for _, f := range client.Refused() {
		if transport.Classify(f.Err) != transport.ClassRecord {
			continue
		}
		m := f.Msg
		r.known[r.fingerprintOf(m.Topic, m.Partition, m.Key, m.Value)] = refusal{err: f.Err, learned: r.commits}
		r.log.Warn("the broker refused a record for good; when it is sent again it goes to its sender's error policy",
			zap.String("topic", m.Topic), zap.Int32("partition", m.Partition), zap.Error(f.Err))
	}
	client.Watch()
}

// committed ends watching once a transaction went through, and forgets
// the refusals learned keepCommits commits ago.
func (r *refusals) committed(client transport.Producer) {
	client.Unwatch()
	r.commits++
	for f, k := range r.known {
		if r.commits-k.learned > keepCommits {
			delete(r.known, f)
		}
	}
}
