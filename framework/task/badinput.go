package task

// Bad input: what a task does with a record it cannot take, under the
// processor's and the topology's policies.

import (
	"errors"
	"fmt"
	"time"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
)

// badRecord says why a received record goes to the dead-letter policy
// instead of the processor.
type badRecord struct {
	stage  string
	policy framework.BadInputPolicy
	cause  error
}

// Skip names a record an operator moved a failed task past: when the task
// receives it, the record is taken in as claiming nothing and written to
// the dead-letter topic with Reason, instead of being processed.
type Skip struct {
	Record causal.Entry
	Reason string
}

// RecordError is a task's failure on one input record: processing it, or
// sending an output that processing it emitted. It names the record, so an
// operator can find it, or move the task past it.
type RecordError struct {
	// Record is the input record.
	Record causal.Entry
	// Stage is framework.StageProcess or framework.StageProduce.
	Stage string
	// Output is the topic that refused the output, for StageProduce.
	Output string
	Err    error
}

// Error implements error.
func (e *RecordError) Error() string {
	at := fmt.Sprintf("%s@%d", e.Record.Channel, e.Record.Offset)
	if e.Stage == framework.StageProduce {
		if e.Record.Channel.Topic == "" {
			at = "a punctuation"
		} else {
			at = "input " + at
		}
		return fmt.Sprintf("output to %s emitted for %s was refused: %v", e.Output, at, e.Err)
	}
	return fmt.Sprintf("process %s: %v", at, e.Err)
}

// Unwrap returns the cause.
func (e *RecordError) Unwrap() error { return e.Err }

// receiveAsBad takes rec, received at now, into the gate as claiming
// nothing, to go to bad's policy instead of the processor when it is due.
func (t *Task) receiveAsBad(rec framework.Record, now time.Time, bad *badRecord) error {
	slot := t.slot(rec, now)
	t.held[slot].bad = bad
	taken, err := t.node.ReceiveHeader(causal.Channel{Topic: rec.Topic, Partition: rec.Partition}, rec.Offset, nil, false, slot)
	t.release(slot, taken)
	return err
}

func clockPolicy(info framework.ProcessorInfo, badInput framework.BadInputPolicy) framework.BadInputPolicy {
	if info.ProcessingPolicy(framework.ErrDeserialize, badInput) == framework.DeadLetter {
		return framework.DeadLetter
	}
	return framework.FailTask
}

// refuseUnlessClaim refuses the record with err, unless err is a claim the
// caller can settle (CheckClaims): that one goes back to it as it is, and
// the task stays as it was.
func (t *Task) refuseUnlessClaim(err error) error {
	if errors.Is(err, causal.ErrClaimBeyondEnd) {
		return err
	}
	return t.refuse(err)
}

// ReceiveBad takes in rec as bad input because of cause (a claim that
// cannot be met): under a DeadLetter policy it is taken in as claiming
// nothing and dead-lettered when due, and the task goes on; otherwise the
// task refuses it and fails, as for a corrupt clock header, with
// everything before it still committable.
func (t *Task) ReceiveBad(rec framework.Record, cause error) error {
	if t.err != nil {
		return t.err
	}
	if t.clockPolicy != framework.DeadLetter {
		return t.refuse(cause)
	}
	now := t.cfg.Now()
	if err := t.receiveAsBad(rec, now, &badRecord{stage: framework.StageClock, policy: framework.DeadLetter, cause: cause}); err != nil {
		return t.refuse(err)
	}
	return t.drain(now)
}

// skipped reports whether the record at off on ch is one to move past, and
// why.
func (t *Task) skipped(ch causal.Channel, off int64) (string, bool) {
	for _, s := range t.cfg.Skip {
		if s.Record.Channel == ch && s.Record.Offset == off {
			return s.Reason, true
		}
	}
	return "", false
}

// badInput applies policy (LogAndSkip or DeadLetter) to rec, which failed
// at stage: it is counted, and under DeadLetter written to the
// dead-letter topic with headers naming the input record src, the stage
// and the cause.
func (t *Task) badInput(policy framework.BadInputPolicy, src, rec framework.Record, stage string, cause error) error {
	ev := framework.DropEvent{Reason: "skipped", Record: src, Detail: stage + ": " + cause.Error()}
	if policy == framework.DeadLetter {
		if t.dlq == nil {
			return fmt.Errorf("dead-letter %s/%d@%d: the topology has no dead-letter topic: %w", src.Topic, src.Partition, src.Offset, cause)
		}
		// The dead letter keeps the record's headers as they came, its
		// clock header included (even a corrupt one): it is a record of
		// what arrived, and written back to its topic it claims what it
		// claimed. No gate reads the dead-letter topic, so it needs no
		// stamp of its own.
		dl := framework.NewDeadLetter(rec, framework.Failure{Topic: src.Topic, Partition: src.Partition, Offset: src.Offset,
			Stage: stage, Err: cause, Output: rec.Topic}, framework.StreamHeaders, t.cfg.MaxRecordBytes)
		if err := t.placeDeadLetter(dl, src); err != nil {
			return fmt.Errorf("dead-letter %s/%d@%d: %w", src.Topic, src.Partition, src.Offset, err)
		}
		ev.Reason = "dead-letter"
	}
	t.cfg.Observer.Dropped(t.id, ev)
	return nil
}

// ProductionError applies the processor's production error policy to an
// output Kafka refused for good (cause). Under FailTask the task fails,
// naming the input record that emitted the output, and its snapshot is
// void, as after a processing failure; the error is returned. Under
// LogAndSkip the output is dropped and counted. Under DeadLetter the
// output goes to the dead-letter topic instead: take it with TakeOutputs
// and produce it in the same transaction. keepValue false leaves the value
// out of the dead-letter record (when its size was the problem).
func (t *Task) ProductionError(o Output, cause error, keepValue bool) error {
	if t.err != nil {
		return t.err
	}
	src := framework.Record{Topic: o.From.Channel.Topic, Partition: o.From.Channel.Partition, Offset: o.From.Offset}
	policy := t.info.ProductionErrors
	if t.dlq != nil && o.Topic == t.dlq.topic {
		// A dead letter has nowhere else to go: it goes again without its
		// key and value, its headers saying so, which fits where anything
		// does. Only a dead letter that holds nothing more to cut fails.
		if len(o.Record.Key)+len(o.Record.Value) > 0 {
			if err := t.placeDeadLetter(framework.CutDeadLetter(o.Record), src); err != nil {
				return t.fail(err)
			}
			return nil
		}
		policy = framework.FailTask
	}
	if policy == framework.FailTask {
		return t.fail(&RecordError{Record: o.From, Stage: framework.StageProduce, Output: o.Topic, Err: cause})
	}
	rec := o.Record
	rec.Topic = o.Topic
	if !keepValue {
		rec.Value = nil
	}
	if err := t.badInput(policy, src, rec, framework.StageProduce, cause); err != nil {
		return t.fail(err)
	}
	return nil
}

// placeDeadLetter puts dl into the outbox for the dead-letter topic,
// emitted for src (the input record it stands for; none for a
// punctuation's output).
func (t *Task) placeDeadLetter(dl, src framework.Record) error {
	if err := t.place(t.dlq, dl); err != nil {
		return err
	}
	if src.Topic != "" {
		t.outbox[len(t.outbox)-1].From = causal.Entry{Channel: causal.Channel{Topic: src.Topic, Partition: src.Partition}, Offset: src.Offset}
	}
	return nil
}
