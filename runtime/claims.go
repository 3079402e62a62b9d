package runtime

import (
	"errors"
	"fmt"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
)

// Claims entering the topology from outside are checked before any gate
// folds them (Config.CheckClaims): a claim must name a record that exists.
// A gate hands back a claim beyond what it knows of the claimed channel's
// end; the worker learns that end, cheapest source first, and lets the
// gate try again. A claim still beyond the end is bad input of the record
// that carries it, so it never reaches a stamp, and the error names that
// record.
//
// The end is the partition's high watermark, which counts records of open
// transactions too. A producer that stamps a claim from a delivery report
// of a record written with acks=all (the default) therefore always claims
// below it.

// maxClaimRounds bounds how many claimed channels one record's check
// learns the end of; a clock with more unknown channels than this fails
// the task, naming it.
const maxClaimRounds = 64

// resolveClaims settles the claim error err that rt's task returned for
// rec, and any that follow it, and returns the task's final error.
func (w *Worker) resolveClaims(rt *runningTask, rec framework.Record, err error) error {
	for range maxClaimRounds {
		var ce *causal.ClaimError
		if !errors.As(err, &ce) {
			return err
		}
		end, lerr := w.claimEnd(ce.Claim)
		if lerr != nil {
			return fmt.Errorf("check the claims of %s/%d@%d: %w", rec.Topic, rec.Partition, rec.Offset, lerr)
		}
		if end <= ce.Claim.Offset {
			return rt.t.ReceiveBad(rec, &UnsatisfiableClaimError{Record: causal.Entry{Channel: ce.Channel, Offset: ce.Offset}, Claim: ce.Claim, End: end})
		}
		rt.t.SetEnd(ce.Claim.Channel, end)
		err = rt.t.Receive(rec)
	}
	return fmt.Errorf("check the claims of %s/%d@%d: more than %d channels to look up: %w", rec.Topic, rec.Partition, rec.Offset, maxClaimRounds, err)
}

// claimEnd returns the end of the claim's channel, or -1 when the channel
// does not exist: from what the worker learned before when that covers the
// claim, else from the consumer's own view of the partition, else from the
// broker.
func (w *Worker) claimEnd(claim causal.Entry) (int64, error) {
	ch := claim.Channel
	if end, ok := w.claimEnds[ch]; ok && end > claim.Offset {
		return end, nil
	}
	if _, high, err := w.consumer.GetWatermarkOffsets(ch.Topic, ch.Partition); err == nil && high > claim.Offset {
		w.claimEnds[ch] = high
		return high, nil
	}
	_, high, err := w.consumer.QueryWatermarkOffsets(ch.Topic, ch.Partition, 5000)
	switch errorCode(err) {
	case kafka.ErrNoError:
	case kafka.ErrUnknownTopicOrPart, kafka.ErrUnknownTopic, kafka.ErrUnknownPartition:
		return -1, nil
	default:
		return 0, fmt.Errorf("end of %s: %w", ch, err)
	}
	w.claimEnds[ch] = high
	return high, nil
}
