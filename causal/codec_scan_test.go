package causal

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// genEncoded draws an encoded clock, mostly of the shapes scanRaw reads
// (small partitions, short names), sometimes larger ones, and then
// sometimes damages it: a byte changed, one cut off or one put in.
func genEncoded(t *rapid.T) (b []byte, damaged bool) {
	n := rapid.IntRange(0, 12).Draw(t, "entries")
	es := make([]Entry, 0, n)
	for range n {
		part := rapid.Int32Range(0, 200).Draw(t, "partition")
		if rapid.IntRange(0, 9).Draw(t, "big partition") == 0 {
			part = rapid.Int32Range(0, math.MaxInt32).Draw(t, "partition")
		}
		es = append(es, Entry{
			Channel: Channel{Topic: rapid.StringMatching(`[a-c]{1,3}|[a-z]{130,140}`).Draw(t, "topic"), Partition: part},
			Offset:  rapid.Int64Range(0, math.MaxInt64>>rapid.IntRange(0, 63).Draw(t, "offset shift")).Draw(t, "offset"),
		})
	}
	c, err := NewClock(es...)
	if err != nil {
		t.Fatal(err)
	}
	return damage(t, EncodeClock(c))
}

// damage sometimes damages b, and says so: a byte changed, one cut off or
// one put in.
func damage(t *rapid.T, b []byte) ([]byte, bool) {
	switch rapid.IntRange(0, 3).Draw(t, "damage") {
	case 1:
		i := rapid.IntRange(0, len(b)-1).Draw(t, "at")
		b[i] = rapid.Byte().Draw(t, "byte")
	case 2:
		b = b[:rapid.IntRange(0, len(b)-1).Draw(t, "cut at")]
	case 3:
		i := rapid.IntRange(0, len(b)).Draw(t, "at")
		b = slices.Insert(b, i, rapid.Byte().Draw(t, "byte"))
	default:
		return b, false
	}
	return b, true
}

// genWritten draws a header written field by field, each field now and
// then wrong in one of the ways a header can be: a wrong count, an empty or
// unsorted name, an empty group, a partition past MaxInt32, an offset that
// is not minimal or does not fit, trailing bytes.
func genWritten(t *rapid.T) []byte {
	// One kind of fault a header, at one place at most, so that each is
	// met alone: a second fault would hide the first from scanRaw.
	fault := rapid.SampledFrom([]string{"none", "not minimal", "group count", "name", "entry count", "gap", "offset", "trailing"}).Draw(t, "fault")
	placed := false
	wrong := func(what string) bool {
		if placed || fault != what || !rapid.Bool().Draw(t, what) {
			return false
		}
		placed = true
		return true
	}
	uv := func(b []byte, v uint64) []byte {
		b = binary.AppendUvarint(b, v)
		if wrong("not minimal") {
			b[len(b)-1] |= 0x80
			b = append(b, 0)
		}
		return b
	}
	b := []byte{EncodingVersion}
	groups := rapid.IntRange(0, 4).Draw(t, "groups")
	count := groups
	if wrong("group count") {
		count = rapid.IntRange(0, 6).Draw(t, "count")
	}
	b = uv(b, uint64(count))
	names := []string{"", "a", "b", "c", "d", "e"}
	for g := range groups {
		name := names[g+1]
		if wrong("name") {
			name = rapid.SampledFrom(names).Draw(t, "name")
		}
		b = uv(b, uint64(len(name)))
		b = append(b, name...)
		entries := rapid.IntRange(1, 3).Draw(t, "entries")
		n := entries
		if wrong("entry count") {
			n = rapid.IntRange(0, 4).Draw(t, "n")
			if rapid.Bool().Draw(t, "as many entries") {
				entries = n // an empty group, maybe
			}
		}
		b = uv(b, uint64(n))
		for range entries {
			gap := uint64(rapid.IntRange(0, 3).Draw(t, "gap"))
			if wrong("gap") {
				gap = rapid.SampledFrom([]uint64{0x7f, 0x80, math.MaxInt32 - 1, math.MaxInt32, math.MaxInt32 + 1, math.MaxUint64}).Draw(t, "large gap")
			}
			b = uv(b, gap)
			off := rapid.Uint64Range(0, 1<<21).Draw(t, "offset")
			if wrong("offset") {
				off = rapid.SampledFrom([]uint64{1<<56 - 1, 1 << 56, 1<<63 - 1, 1 << 63, math.MaxUint64}).Draw(t, "large offset")
			}
			b = uv(b, off)
		}
	}
	if wrong("trailing") {
		b = append(b, rapid.Byte().Draw(t, "trailing"))
	}
	return b
}

// TestScanRawAcceptsOnlyWhatTheCheckedDecoderAccepts: the fast path never
// takes a header the checked decoder refuses, decodes what it takes the
// same way, and takes every undamaged header of the shapes it is for.
func TestScanRawAcceptsOnlyWhatTheCheckedDecoderAccepts(t *testing.T) {
	checkManyAndSeeSome(t, checkScanRaw, "scanRaw took no header at all")
}

// checkManyAndSeeSome runs check twenty times a draw under rapid, and fails
// t with nothing when no check counted what the test is for.
func checkManyAndSeeSome(t *testing.T, check func(*rapid.T, *int), nothing string) {
	t.Helper()
	seen := 0
	rapid.Check(t, func(t *rapid.T) {
		for range 20 {
			check(t, &seen)
		}
	})
	if seen == 0 {
		t.Fatal(nothing)
	}
}

// checkScanRaw draws one header and holds scanRaw to the checked decoder on
// it, counting in scanned the headers scanRaw took.
func checkScanRaw(t *rapid.T, scanned *int) {
	b, damaged := genEncoded(t)
	if rapid.Bool().Draw(t, "written") {
		b, damaged = genWritten(t), true
	}
	fg, fp, ok := scanRaw(b, nil, nil)
	cg, cp, err := decodeRawChecked(b, nil, nil)
	if !ok {
		if !damaged && err == nil && smallShapes(cg, cp) {
			t.Fatalf("scanRaw refused a header of the shape it is for: % x", b)
		}
		return
	}
	(*scanned)++
	if err != nil {
		t.Fatalf("scanRaw took % x, which the checked decoder refuses: %v", b, err)
	}
	if !slices.Equal(fp, cp) || len(fg) != len(cg) {
		t.Fatalf("% x: scanRaw read %v %v, the checked decoder %v %v", b, fg, fp, cg, cp)
	}
	for i := range fg {
		if string(fg[i].name) != string(cg[i].name) || fg[i].from != cg[i].from || fg[i].to != cg[i].to || fg[i].start != cg[i].start || fg[i].end != cg[i].end {
			t.Fatalf("% x: group %d: scanRaw read %+v, the checked decoder %+v", b, i, fg[i], cg[i])
		}
	}
}

// smallShapes reports whether a decoded header is of the shape scanRaw
// reads: fewer than 128 groups, names and entries of a group, partition
// gaps below 128 and offsets below 2^63.
func smallShapes(groups []rawGroup, parts []partOffset) bool {
	if len(groups) >= 0x80 {
		return false
	}
	for _, g := range groups {
		if len(g.name) >= 0x80 || g.to-g.from >= 0x80 {
			return false
		}
		prev := int32(-1)
		for _, p := range parts[g.from:g.to] {
			if p.part-prev-1 >= 0x80 {
				return false
			}
			prev = p.part
		}
	}
	return true
}

// TestDecodeRawAfterDecodesAsDecodeRaw: a header decoded after the one
// before it on its channel is accepted exactly when decodeRaw accepts it,
// its groups lie where decodeRaw puts them, and a group it keeps has the
// bytes of the group of the header before in the same place, while every
// other group has the entries decodeRaw reads. The headers after are
// mostly the one before with an entry moved on, as upstream stamps change
// from record to record, and sometimes damaged.
func TestDecodeRawAfterDecodesAsDecodeRaw(t *testing.T) {
	checkManyAndSeeSome(t, checkDecodeRawAfter, "no group was kept: the test sees nothing of what it is for")
}

// checkDecodeRawAfter draws a header and the one after it and holds
// decodeRawAfter to decodeRaw on them, counting in kept the groups it kept.
func checkDecodeRawAfter(t *rapid.T, kept *int) {
	es := genEntries(t)
	c, err := NewClock(es...)
	if err != nil {
		t.Fatal(err)
	}
	last := EncodeClock(c)
	lastGroups, _, err := decodeRaw(last, nil, nil)
	if err != nil {
		t.Fatalf("% x: %v", last, err)
	}
	spans := make([]span, len(lastGroups))
	for i, g := range lastGroups {
		spans[i] = span{start: g.start, end: g.end}
	}
	next := slices.Clone(es)
	if len(next) > 0 {
		i := rapid.IntRange(0, len(next)-1).Draw(t, "moved entry")
		next[i].Offset += rapid.Int64Range(0, 1<<20).Draw(t, "moved by")
	}
	nc, err := NewClock(next...)
	if err != nil {
		t.Fatal(err)
	}
	b := EncodeClock(nc)
	if rapid.IntRange(0, 3).Draw(t, "renamed") == 0 {
		// A name written over with a's, which sorts it before the name of
		// the group before it from the third group on.
		if gs, _, err := decodeRaw(b, nil, nil); err == nil && len(gs) > 2 {
			g := gs[rapid.IntRange(2, len(gs)-1).Draw(t, "renamed group")]
			for i := g.start + 1; i < g.start+1+len(g.name); i++ {
				b[i] = 'a'
			}
		}
	} else {
		b, _ = damage(t, b)
	}
	ag, ap, aerr := decodeRawAfter(b, last, spans, nil, nil)
	wg, wp, werr := decodeRaw(b, nil, nil)
	if (aerr == nil) != (werr == nil) {
		t.Fatalf("% x after % x: decodeRawAfter says %v, decodeRaw %v", b, last, aerr, werr)
	}
	if werr != nil {
		return
	}
	if len(ag) != len(wg) {
		t.Fatalf("% x after % x: %d groups, decodeRaw %d", b, last, len(ag), len(wg))
	}
	for i := range ag {
		a, w := ag[i], wg[i]
		if string(a.name) != string(w.name) || a.start != w.start || a.end != w.end {
			t.Fatalf("% x after % x: group %d is %+v, decodeRaw %+v", b, last, i, a, w)
		}
		if a.kept {
			(*kept)++
			if i >= len(spans) || spans[i] != (span{a.start, a.end}) || string(b[a.start:a.end]) != string(last[a.start:a.end]) {
				t.Fatalf("% x after % x: group %d kept, but not as it was", b, last, i)
			}
			continue
		}
		if !slices.Equal(ap[a.from:a.to], wp[w.from:w.to]) {
			t.Fatalf("% x after % x: group %d has %v, decodeRaw %v", b, last, i, ap[a.from:a.to], wp[w.from:w.to])
		}
	}
}

// genEntries draws the entries of a clock of a few topics, each with a few
// partitions: the shape of an upstream stamp.
func genEntries(t *rapid.T) []Entry {
	var es []Entry
	for _, topic := range []string{"a", "bb", "c", "dd"}[:rapid.IntRange(0, 4).Draw(t, "topics")] {
		for part := range int32(rapid.IntRange(1, 4).Draw(t, "partitions")) {
			es = append(es, Entry{Channel: Channel{Topic: topic, Partition: part}, Offset: rapid.Int64Range(0, 1<<30).Draw(t, "offset")})
		}
	}
	return es
}
