package causal

// queue is a FIFO on a slice that reuses its storage: once warm, push and pop
// do not allocate.
type queue[T any] struct {
	items []T
	head  int
}

func (q *queue[T]) len() int { return len(q.items) - q.head }

func (q *queue[T]) push(v T) {
	q.makeRoom(1)
	q.items = append(q.items, v)
}

// pushAll appends vs in order.
func (q *queue[T]) pushAll(vs []T) {
	if len(vs) == 0 {
		return
	}
	q.makeRoom(len(vs))
	q.items = append(q.items, vs...)
}

// makeRoom slides the live part down, instead of letting the next append
// grow the storage, when k more elements do not fit and at least half of the
// storage in use lies before the head.
func (q *queue[T]) makeRoom(k int) {
	if q.head > 0 && len(q.items)+k > cap(q.items) && q.head >= len(q.items)/2 {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
}

func (q *queue[T]) pop() T {
	var zero T
	v := q.items[q.head]
	q.items[q.head] = zero // release the payload
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return v
}

// front returns the k oldest elements; the queue must hold at least k.
func (q *queue[T]) front(k int) []T { return q.items[q.head : q.head+k] }

// drop removes the k oldest elements; the queue must hold at least k.
func (q *queue[T]) drop(k int) {
	clear(q.items[q.head : q.head+k])
	q.head += k
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
}

// first returns the oldest element; the queue must not be empty.
func (q *queue[T]) first() *T { return &q.items[q.head] }

// heapPush and heapPop keep a binary min-heap of waiters ordered by offset.
// They are written out rather than taken from container/heap so that the hot
// path has no interface conversions and no allocations.
func heapPush(h *[]waiter, w waiter) {
	*h = append(*h, w)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s[p].off <= s[i].off {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func heapPop(h *[]waiter) waiter {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].off < s[m].off {
			m = l
		}
		if r < len(s) && s[r].off < s[m].off {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
