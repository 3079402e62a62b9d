package causal

// Session brings causality into the system from outside: a client that
// writes an order and then its payment stamps the payment with a Session so
// that every gate downstream delivers the order first.
//
// A Session remembers the offsets of the records it produced (from delivery
// reports) and of those it consumed, and the full clocks of the consumed
// ones. Folding consumed clocks, not just their offsets, is what keeps the
// gate's ignore branch sound for records that enter from outside: a gate
// that does not consume the channel a session read from still sees that
// record's own causes claimed directly.
//
// Like Node, a Session is a pure value holder: no I/O, not safe for
// concurrent use.
type Session struct {
	clock Clock
}

// Produced records that the session's record was appended to ch at off.
// Call it from the delivery report, before producing anything that depends
// on the record.
func (s *Session) Produced(ch Channel, off int64) {
	s.clock = s.clock.Join(Clock{entries: []Entry{{Channel: ch, Offset: off}}})
}

// Consumed records that the session read the record at off on ch, carrying
// clock.
func (s *Session) Consumed(ch Channel, off int64, clock Clock) {
	s.clock = s.clock.Join(clock).Join(Clock{entries: []Entry{{Channel: ch, Offset: off}}})
}

// Clock returns what the next record produced by the session claims.
func (s *Session) Clock() Clock { return s.clock }

// AppendHeader appends the encoded clock to dst, for the HeaderKey header.
func (s *Session) AppendHeader(dst []byte) []byte { return AppendClock(dst, s.clock) }

// ResumeSession returns a session whose next record claims c: a session
// carried over from elsewhere, such as the token of an HTTP client (the
// clock of what it wrote so far).
func ResumeSession(c Clock) Session { return Session{clock: c} }
