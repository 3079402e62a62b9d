package framework

import (
	"time"
)

// Header is one Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is a Kafka record as a processor sees it: raw key and value bytes,
// headers, timestamp, and where it came from. Typed processors decode Key and
// Value with serdes (see package serde and the operators).
type Record struct {
	Key       []byte
	Value     []byte
	Headers   []Header
	Timestamp time.Time

	// Where the record was read from; zero for records a processor builds.
	Topic     string
	Partition int32
	Offset    int64

	// PartitionKey, when set, is what an emitted record's partition is
	// chosen by instead of Key: a windowed result is placed by its base
	// key, as Kafka Streams' WindowedStreamPartitioner places it, so that
	// a consumer co-partitioned on the base key finds it. It is not
	// written.
	PartitionKey []byte
}

// Header returns the value of the last header named key, and whether there
// is one.
func (r Record) Header(key string) ([]byte, bool) {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == key {
			return r.Headers[i].Value, true
		}
	}
	return nil, false
}

// WithHeader returns a copy of r whose headers have key set to value,
// replacing any header of that name.
func (r Record) WithHeader(key string, value []byte) Record {
	hs := make([]Header, 0, len(r.Headers)+1)
	for _, h := range r.Headers {
		if h.Key != key {
			hs = append(hs, h)
		}
	}
	r.Headers = append(hs, Header{Key: key, Value: value})
	return r
}
