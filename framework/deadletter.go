package framework

import (
	"slices"
	"strconv"
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
