package framework

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// FitDeadLetter cuts dl's value, and its key if need be, so that its
// key, value and headers hold at most limit bytes (none when limit is 0
// or less): a dead letter, and so a skip, must always be writable. The
// headers HeaderDLQTruncated and HeaderDLQOriginalSize say what was cut
// and how large key and value were.
func FitDeadLetter(dl Record, limit int) Record {
	size := len(dl.Key) + len(dl.Value)
	if limit <= 0 || size+headersSize(dl.Headers) <= limit {
		return dl
	}
	room := limit - headersSize(dl.Headers) - len(HeaderDLQTruncated) - len("key,value") - len(HeaderDLQOriginalSize) - 20
	if room < len(dl.Key) {
		return CutDeadLetter(dl)
	}
	cut := dl
	cut.Value = dl.Value[:max(0, room-len(dl.Key))]
	return cut.WithHeader(HeaderDLQTruncated, []byte("value")).
		WithHeader(HeaderDLQOriginalSize, []byte(strconv.Itoa(size)))
}

// CutDeadLetter is dl without key and value, its headers saying so and
// how large they were (as dl says, when it was cut before): what fits
// where anything does, for a dead letter Kafka refused as it was.
func CutDeadLetter(dl Record) Record {
	size := len(dl.Key) + len(dl.Value)
	if v, ok := dl.Header(HeaderDLQOriginalSize); ok {
		if n, err := strconv.Atoi(string(v)); err == nil {
			size = n
		}
	}
	cut := dl
	cut.Key, cut.Value = nil, nil
	cut.Headers = slices.DeleteFunc(slices.Clone(dl.Headers), func(h Header) bool {
		return h.Key == HeaderDLQTruncated || h.Key == HeaderDLQOriginalSize
	})
	return cut.WithHeader(HeaderDLQTruncated, []byte("key,value")).
		WithHeader(HeaderDLQOriginalSize, []byte(strconv.Itoa(size)))
}

// headersSize is the bytes of hs's keys and values.
func headersSize(hs []Header) int {
	n := 0
	for _, h := range hs {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// DeadLetterVocabulary names the set of headers a dead letter says its
// failure in. Every dead letter, a stream task's or a connector's, is
// written by NewDeadLetter; only the names differ.
type DeadLetterVocabulary int

const (
	// StreamHeaders are the stream worker's: HeaderDLQTopic and the other
	// causeway.dlq.* headers.
	StreamHeaders DeadLetterVocabulary = iota
	// ConnectHeaders are Kafka Connect's (KIP-298, with
	// errors.deadletterqueue.context.headers.enable): ConnectHeaderTopic
	// and the other __connect.errors.* headers, which the connect
	// worker's sinks write so that tools made for Connect read them.
	ConnectHeaders
)

// Kafka Connect's dead-letter headers (KIP-298), as ConnectHeaders writes
// them.
const (
	ConnectHeaderTopic               = "__connect.errors.topic"
	ConnectHeaderPartition           = "__connect.errors.partition"
	ConnectHeaderOffset              = "__connect.errors.offset"
	ConnectHeaderConnector           = "__connect.errors.connector.name"
	ConnectHeaderTask                = "__connect.errors.task.id"
	ConnectHeaderStage               = "__connect.errors.stage"
	ConnectHeaderClass               = "__connect.errors.class.name"
	ConnectHeaderExceptionClass      = "__connect.errors.exception.class.name"
	ConnectHeaderExceptionMessage    = "__connect.errors.exception.message"
	ConnectHeaderExceptionStacktrace = "__connect.errors.exception.stacktrace"
)

// Failure is what a dead letter says of the record it stands for and of
// what failed.
type Failure struct {
	// Topic, Partition and Offset are where the record was read; an empty
	// Topic names none (an output of a punctuation).
	Topic     string
	Partition int32
	Offset    int64
	// Stage is what failed: one of the Stage constants for StreamHeaders;
	// Kafka Connect's stage names (TASK_PUT, VALUE_CONVERTER, ...) for
	// ConnectHeaders.
	Stage string
	Err   error
	// Output is the output topic that refused the dead letter's record,
	// when it is not the record read (StageProduce); StreamHeaders only.
	Output string
	// Connector, Task and Class name the connector task that failed, and
	// the class (or type) of its connector; ConnectHeaders only.
	Connector string
	Task      int
	Class     string
}

// NewDeadLetter is the dead letter for rec, which failed as f says: rec's
// key, value, timestamp and headers as they came (a clock header
// included, even a corrupt one: a dead letter is a record of what arrived,
// and no gate reads a dead-letter topic), then the headers of v, cut to
// fit limit bytes (FitDeadLetter).
//
// Under ConnectHeaders the exception class is the Go type of f.Err and
// the stack trace the types of its chain of wrapped errors, one a line: Go
// errors carry no stack.
func NewDeadLetter(rec Record, f Failure, v DeadLetterVocabulary, limit int) Record {
	dl := Record{Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp, Headers: slices.Clone(rec.Headers)}
	// A header already there (the record was a dead letter before) gives
	// way to this failure's.
	add := func(k, v string) { dl = dl.WithHeader(k, []byte(v)) }
	msg := ""
	if f.Err != nil {
		msg = f.Err.Error()
	}
	switch v {
	case ConnectHeaders:
		add(ConnectHeaderTopic, f.Topic)
		add(ConnectHeaderPartition, strconv.Itoa(int(f.Partition)))
		add(ConnectHeaderOffset, strconv.FormatInt(f.Offset, 10))
		add(ConnectHeaderConnector, f.Connector)
		add(ConnectHeaderTask, strconv.Itoa(f.Task))
		add(ConnectHeaderStage, f.Stage)
		add(ConnectHeaderClass, f.Class)
		add(ConnectHeaderExceptionClass, fmt.Sprintf("%T", f.Err))
		add(ConnectHeaderExceptionMessage, msg)
		add(ConnectHeaderExceptionStacktrace, errorChain(f.Err))
	default:
		if f.Topic != "" {
			add(HeaderDLQTopic, f.Topic)
			add(HeaderDLQPartition, strconv.FormatInt(int64(f.Partition), 10))
			add(HeaderDLQOffset, strconv.FormatInt(f.Offset, 10))
		}
		add(HeaderDLQStage, f.Stage)
		add(HeaderDLQError, msg)
		if f.Output != "" && f.Output != f.Topic {
			add(HeaderDLQOutput, f.Output)
		}
	}
	return FitDeadLetter(dl, limit)
}

// errorChain is the types of err and of the errors it wraps, outermost
// first, one a line: the message is in its own header, and each wrap's
// message repeats the one it wraps.
func errorChain(err error) string {
	var b strings.Builder
	for err != nil {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%T", err)
		err = errors.Unwrap(err)
	}
	return b.String()
}
