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
	b = EncodeClock(c)
	switch rapid.IntRange(0, 3).Draw(t, "damage") {
	case 1:
		i := rapid.IntRange(0, len(b)-1).Draw(t, "at")
		b[i] = rapid.Byte().Draw(t, "byte")
		damaged = true
	case 2:
		b = b[:rapid.IntRange(0, len(b)-1).Draw(t, "cut at")]
		damaged = true
	case 3:
		i := rapid.IntRange(0, len(b)).Draw(t, "at")
		b = slices.Insert(b, i, rapid.Byte().Draw(t, "byte"))
		damaged = true
	}
	return b, damaged
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
	scanned := 0
	rapid.Check(t, func(t *rapid.T) {
		for range 20 {
			checkScanRaw(t, &scanned)
		}
	})
	if scanned == 0 {
		t.Fatal("scanRaw took no header at all")
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
