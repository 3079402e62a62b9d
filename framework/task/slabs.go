package task

// slabs carves small slices (stamps, output header lists) out of larger
// ones, so that an output costs no allocation of its own. Carved bytes are
// never written again while an output may point to them: a slab is only
// reused after release, which its owner calls once nothing carved so far
// is needed any more.
type slabs[T any] struct {
	size int // elements a new slab holds
	// keep is how many full slabs release keeps for reuse at most.
	keep int
	cur  []T
	full [][]T // filled since the last release, oldest first
	// spare holds released slabs, emptied, for room to take before it
	// makes a new one.
	spare [][]T
}

// room makes sure the current slab has room for n more elements, moving
// on to a spare or new slab if it has not.
func (s *slabs[T]) room(n int) {
	if cap(s.cur)-len(s.cur) >= n {
		return
	}
	s.retire()
	if k := len(s.spare); k > 0 && cap(s.spare[k-1]) >= n {
		s.cur = s.spare[k-1]
		s.spare[k-1] = nil
		s.spare = s.spare[:k-1]
		return
	}
	s.cur = make([]T, 0, max(s.size, n))
}

// retire puts the current slab with the full ones, if release would keep
// it; one it would not is left to the garbage collector.
func (s *slabs[T]) retire() {
	if s.cur != nil && len(s.full)+len(s.spare) < s.keep {
		s.full = append(s.full, s.cur)
	}
	s.cur = nil
}

// release makes every slab spare, the current one emptied where it is:
// nothing carved from them is needed any more. Spare slabs beyond twice
// what was filled since the last release are let go, so that a task whose
// load fell keeps no more than it now needs.
func (s *slabs[T]) release() {
	filled := len(s.full)
	for _, f := range s.full {
		s.spare = append(s.spare, f[:0])
	}
	clear(s.full)
	s.full = s.full[:0]
	s.cur = s.cur[:0]
	if n := 2*filled + 1; len(s.spare) > n {
		clear(s.spare[n:])
		s.spare = s.spare[:n]
	}
}
