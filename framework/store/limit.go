package store

import "fmt"

// RecordTooLargeError is returned by a store made with Limit for a write
// whose key and value together exceed the limit: its changelog record
// would be refused by Kafka for good. The write is not made.
type RecordTooLargeError struct {
	Store string
	// Size is the write's key and value, in bytes; Limit the most the
	// store takes.
	Size, Limit int
}

// Error implements error.
func (e *RecordTooLargeError) Error() string {
	return fmt.Sprintf("store %q: a write of %d bytes (key and value) is over the %d its changelog records may hold; "+
		"raise the changelog topic's max.message.bytes and the worker's --max-record-bytes, or write smaller values", e.Store, e.Size, e.Limit)
}

// Limit returns m with every Put whose key and value exceed limit bytes
// refused with a *RecordTooLargeError naming the store name, before
// anything is written: a change its changelog can never hold fails the
// record that made it, rather than every transaction that would carry it.
// A limit of 0 or less returns m as it is.
func Limit(m Logged, name string, limit int) Logged {
	if limit <= 0 {
		return m
	}
	return limited{Logged: m, name: name, limit: limit}
}

type limited struct {
	Logged
	name  string
	limit int
}

func (l limited) Put(key, value []byte) error {
	if n := len(key) + len(value); n > l.limit {
		return &RecordTooLargeError{Store: l.name, Size: n, Limit: l.limit}
	}
	return l.Logged.Put(key, value)
}
