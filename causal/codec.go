package causal

import (
	"encoding/binary"
	"math"
)

// HeaderKey is the name of the Kafka record header that carries a record's
// dependency clock. A record without it claims nothing.
const HeaderKey = "causeway-clock"

// EncodingVersion is the version byte this build writes and the only one it
// reads. A header with any other first byte fails to decode, so an encoding
// introduced later fails closed in older readers.
const EncodingVersion byte = 1

// MaxTopicLen is the longest topic name Kafka accepts, and so the longest the
// decoder accepts.
const MaxTopicLen = 249

// The encoding, version 1, in order:
//
//	version   byte (1)
//	groups    uvarint: number of topics
//	per topic, in strictly increasing name order:
//	  name    uvarint length (1..249), then the name's bytes
//	  count   uvarint: entries of this topic (at least 1)
//	  per entry, in strictly increasing partition order:
//	    partition  uvarint: the partition for the first entry, the gap to the
//	               previous partition minus one for the others
//	    offset     uvarint
//
// Every varint is minimal, so each clock has exactly one encoding. An entry
// with a small partition and an offset below 2^21 takes four bytes.

// AppendClock appends the encoding of c to dst and returns the extended slice.
func AppendClock(dst []byte, c Clock) []byte {
	return appendEntries(dst, c.entries)
}

// EncodeClock returns the encoding of c in a new slice.
func EncodeClock(c Clock) []byte {
	return AppendClock(make([]byte, 0, encodedSizeHint(c.entries)), c)
}

func encodedSizeHint(es []Entry) int {
	n := 2
	prev := ""
	for i, e := range es {
		if i == 0 || e.Channel.Topic != prev {
			n += len(e.Channel.Topic) + 2
			prev = e.Channel.Topic
		}
		n += 5
	}
	return n
}

func appendEntries(dst []byte, es []Entry) []byte {
	dst = append(dst, EncodingVersion)
	groups := 0
	for i := range es {
		if i == 0 || es[i].Channel.Topic != es[i-1].Channel.Topic {
			groups++
		}
	}
	dst = binary.AppendUvarint(dst, uint64(groups))
	for i := 0; i < len(es); {
		topic := es[i].Channel.Topic
		j := i + 1
		for j < len(es) && es[j].Channel.Topic == topic {
			j++
		}
		dst = binary.AppendUvarint(dst, uint64(len(topic)))
		dst = append(dst, topic...)
		dst = binary.AppendUvarint(dst, uint64(j-i))
		prev := int64(-1)
		for _, e := range es[i:j] {
			dst = binary.AppendUvarint(dst, uint64(int64(e.Channel.Partition)-prev-1))
			dst = binary.AppendUvarint(dst, uint64(e.Offset))
			prev = int64(e.Channel.Partition)
		}
		i = j
	}
	return dst
}

// decoder reads a header left to right, remembering where it is for errors.
type decoder struct {
	b   []byte
	pos int
}

func (d *decoder) fail(reason error) error { return &DecodeError{Pos: d.pos, Reason: reason} }

// uvarint reads one minimal unsigned varint. Most of a clock's varints
// (lengths, counts, partition gaps) are one byte: that case is read here,
// without the general loop of uvarintLong.
func (d *decoder) uvarint() (uint64, error) {
	if p := d.pos; p < len(d.b) {
		if c := d.b[p]; c < 0x80 {
			d.pos = p + 1
			return uint64(c), nil
		}
	}
	return d.uvarintLong()
}

func (d *decoder) uvarintLong() (uint64, error) {
	v, n := binary.Uvarint(d.b[d.pos:])
	switch {
	case n == 0:
		return 0, d.fail(ErrTruncated)
	case n < 0:
		return 0, d.fail(ErrOverflow)
	case n > 1 && d.b[d.pos+n-1] == 0:
		// A final zero byte adds nothing: the same value has a shorter form.
		return 0, d.fail(ErrNonMinimal)
	}
	d.pos += n
	return v, nil
}

// count reads a length or count that cannot exceed what the remaining bytes
// could hold when each unit takes at least unit bytes. This bounds every
// allocation by the input's size.
func (d *decoder) count(unit int) (int, error) {
	start := d.pos
	v, err := d.uvarint()
	if err != nil {
		return 0, err
	}
	if v > uint64(len(d.b)-d.pos)/uint64(unit) {
		d.pos = start
		return 0, d.fail(ErrOverflow)
	}
	return int(v), nil
}

// DecodeClock decodes a clock header value. A nil or empty value is not an
// absent header: callers decide absence from the header's presence and pass
// only present values here. Every failure is a *DecodeError matching
// ErrMalformedClock; the decoder never panics and allocates in proportion to
// len(b) at most.
func DecodeClock(b []byte) (Clock, error) {
	var groupBuf [8]rawGroup
	var partBuf [32]partOffset
	groups, parts, err := decodeRaw(b, groupBuf[:0], partBuf[:0])
	if err != nil {
		return Clock{}, err
	}
	if len(parts) == 0 {
		return Clock{}, nil
	}
	entries := make([]Entry, 0, len(parts))
	for _, g := range groups {
		topic := string(g.name)
		for _, p := range parts[g.from:g.to] {
			entries = append(entries, Entry{Channel: Channel{Topic: topic, Partition: p.part}, Offset: p.off})
		}
	}
	return Clock{entries: entries}, nil
}

// rawGroup is one topic of an encoded clock as decodeRaw leaves it: the
// name's bytes inside the header, and where the topic's entries lie in the
// parts decodeRaw filled.
type rawGroup struct {
	name     []byte
	from, to int
	// start and end bound the group's bytes in the header, from its name's
	// length to its last offset.
	start, end int
	// kept marks a group decodeRawAfter did not decode again: it has the
	// same bytes, in the same place, as a group of the header before, so
	// it is well formed and claims what that group claimed. Its entries
	// are not listed (from == to).
	kept bool
}

// decodeRaw validates an encoded clock and appends its topics to groups and
// its entries, sorted by partition within each topic, to parts. It turns no
// name into a string, so with reused slices it does not allocate; the names
// alias b. On failure the returned slices hold a partial decoding.
//
// It first tries scanRaw, which reads the common shapes of a header in one
// tight loop; anything scanRaw does not take is decoded again by
// decodeRawChecked, which accepts the same headers and says where and why
// it refuses one.
func decodeRaw(b []byte, groups []rawGroup, parts []partOffset) ([]rawGroup, []partOffset, error) {
	g0, p0 := len(groups), len(parts)
	if groups, parts, ok := scanRaw(b, groups, parts); ok {
		return groups, parts, nil
	}
	return decodeRawChecked(b, groups[:g0], parts[:p0])
}

// decodeRawAfter is decodeRaw for b, the header that follows last on its
// channel, where last is a header decodeRaw accepted and lastGroups are its
// groups' places. The leading groups b has byte for byte where last had
// them, after the same version and group count, are not decoded again:
// they are listed as kept, with their names and places but no entries.
// Upstream stamps mostly change in one group from one record to the next,
// so most of a header is skipped. What follows the kept groups is decoded
// as decodeRaw would, and b is refused exactly when decodeRaw refuses it.
func decodeRawAfter(b, last []byte, lastGroups []span, groups []rawGroup, parts []partOffset) ([]rawGroup, []partOffset, error) {
	kept := 0
	if len(lastGroups) > 0 && len(b) > 2 && len(last) > 2 && lastGroups[0].start == 2 && string(b[:2]) == string(last[:2]) {
		// The same version and one-byte group count; then each group in
		// turn, while it has the same bytes in the same place.
		for _, g := range lastGroups {
			if g.end > len(b) || b[g.start] >= 0x80 || string(b[g.start:g.end]) != string(last[g.start:g.end]) {
				break
			}
			kept++
		}
	}
	if kept == 0 {
		return decodeRaw(b, groups, parts)
	}
	g0, p0 := len(groups), len(parts)
	var name []byte
	for _, g := range lastGroups[:kept] {
		name = b[g.start+1 : g.start+1+int(b[g.start])]
		groups = append(groups, rawGroup{name: name, from: len(parts), to: len(parts), start: g.start, end: g.end, kept: true})
	}
	if groups, parts, ok := scanGroups(b, groups, parts, int(b[1]), kept, lastGroups[kept-1].end, name); ok {
		return groups, parts, nil
	}
	return decodeRaw(b, groups[:g0], parts[:p0])
}

// scanRaw decodes b as decodeRawChecked does when b is well formed and its
// group count, name lengths, entry counts and partition gaps each fit in
// one byte, its names are sorted and each offset takes at most nine bytes.
// It reports false for every other input, well formed or not: it never
// accepts what decodeRawChecked refuses.
func scanRaw(b []byte, groups []rawGroup, parts []partOffset) ([]rawGroup, []partOffset, bool) {
	if len(b) < 2 || b[0] != EncodingVersion || b[1] >= 0x80 {
		return groups, parts, false
	}
	return scanGroups(b, groups, parts, int(b[1]), 0, 2, nil)
}

// scanGroups is scanRaw from group g of count on, which starts at byte p
// of b; prev is the name of the group before it.
func scanGroups(b []byte, groups []rawGroup, parts []partOffset, count, g, p int, prev []byte) ([]rawGroup, []partOffset, bool) {
	// No count needs a bound here: each group and entry takes bytes, so a
	// count too large for b runs out of them.
	for ; g < count; g++ {
		start := p
		if p >= len(b) {
			return groups, parts, false
		}
		nameLen := int(b[p])
		p++
		// 0x80 and above is a longer varint; a name of up to 127 bytes is
		// within MaxTopicLen.
		if nameLen == 0 || nameLen >= 0x80 || nameLen > len(b)-p {
			return groups, parts, false
		}
		name := b[p : p+nameLen]
		if g > 0 && string(name) <= string(prev) {
			return groups, parts, false
		}
		p += nameLen
		if p >= len(b) {
			return groups, parts, false
		}
		n := int(b[p])
		p++
		if n == 0 || n >= 0x80 {
			return groups, parts, false
		}
		from := len(parts)
		part := int64(-1)
		for range n {
			if p >= len(b) || b[p] >= 0x80 {
				return groups, parts, false
			}
			// Fewer than 128 entries with gaps below 128: part stays far
			// below MaxInt32.
			part += 1 + int64(b[p])
			p++
			// The offset: at most nine bytes, so at most 63 bits, and minimal
			// (a last byte of zero after others has a shorter form).
			var off uint64
			for shift := uint(0); ; shift += 7 {
				if p >= len(b) || shift > 56 {
					return groups, parts, false
				}
				c := b[p]
				p++
				if c < 0x80 {
					if c == 0 && shift > 0 {
						return groups, parts, false
					}
					off |= uint64(c) << shift
					break
				}
				off |= uint64(c&0x7f) << shift
			}
			parts = append(parts, partOffset{part: int32(part), off: int64(off)})
		}
		groups = append(groups, rawGroup{name: name, from: from, to: len(parts), start: start, end: p})
		prev = name
	}
	return groups, parts, p == len(b)
}

// decodeRawChecked is decodeRaw one varint at a time, each read checked and
// every failure placed.
func decodeRawChecked(b []byte, groups []rawGroup, parts []partOffset) ([]rawGroup, []partOffset, error) {
	d := decoder{b: b}
	if len(b) == 0 {
		return groups, parts, d.fail(ErrTruncated)
	}
	if b[0] != EncodingVersion {
		return groups, parts, d.fail(ErrUnknownVersion)
	}
	d.pos = 1
	// A topic group takes at least 5 bytes: name length, one name byte,
	// count, partition and offset.
	count, err := d.count(5)
	if err != nil {
		return groups, parts, err
	}
	var prev []byte
	for g := 0; g < count; g++ {
		start := d.pos
		nameLen, err := d.count(1)
		if err != nil {
			return groups, parts, err
		}
		switch {
		case nameLen == 0:
			return groups, parts, d.fail(ErrEmptyTopic)
		case nameLen > MaxTopicLen:
			return groups, parts, d.fail(ErrTopicTooLong)
		}
		name := b[d.pos : d.pos+nameLen]
		if g > 0 && string(name) <= string(prev) {
			return groups, parts, d.fail(ErrUnsorted)
		}
		d.pos += nameLen
		// An entry takes at least 2 bytes.
		n, err := d.count(2)
		if err != nil {
			return groups, parts, err
		}
		if n == 0 {
			return groups, parts, d.fail(ErrEmptyGroup)
		}
		from := len(parts)
		part := int64(-1)
		for range n {
			gap, err := d.uvarint()
			if err != nil {
				return groups, parts, err
			}
			if gap > math.MaxInt32 || part+1+int64(gap) > math.MaxInt32 {
				return groups, parts, d.fail(ErrOverflow)
			}
			part += 1 + int64(gap)
			off, err := d.uvarint()
			if err != nil {
				return groups, parts, err
			}
			if off > math.MaxInt64 {
				return groups, parts, d.fail(ErrOverflow)
			}
			parts = append(parts, partOffset{part: int32(part), off: int64(off)})
		}
		groups = append(groups, rawGroup{name: name, from: from, to: len(parts), start: start, end: d.pos})
		prev = name
	}
	if d.pos != len(b) {
		return groups, parts, d.fail(ErrTrailingBytes)
	}
	return groups, parts, nil
}
