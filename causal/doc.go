// Package causal is Causeway's causal delivery layer: dependency clocks,
// their header encoding, and the delivery gate that sits in front of every
// processor instance so that no record is processed before the records it
// depends on, even when those arrived on another, lagging topic.
//
// The package is a deterministic state machine in the manner of etcd's raft
// RawNode: it performs no I/O, starts no goroutines, reads no clock and logs
// nothing. Inputs are method calls; outputs are values the caller acts on.
// The runtime drives it against Kafka; tests drive it against simulations.
//
// # Clocks
//
// A Clock maps channels (topic-partitions) to offsets. A record's clock
// claims that every business record at or below each offset happened before
// it. It travels in the record header named HeaderKey, encoded by
// AppendClock and read by DecodeClock. A record without that header claims
// nothing; a header that does not decode is an error, never an empty clock.
//
// # The node
//
// A Node is the gate of one task. It keeps, for each consumed channel, a
// FIFO of received records and a frontier: the offset at or below which
// every business record has been delivered. The head of a queue is
// delivered once the frontier covers its clock, ignoring the entry for the
// head's own channel and entries for channels the node does not consume.
// Each blocked head waits on exactly one unmet claim and is looked at again
// only when that channel's frontier reaches it, so the work per record is
// proportional to its clock, not to the number of held records.
//
// # The caller's duties
//
// The node is only as sound as the calls it receives. The caller must:
//
//  1. Create the node with NewNode naming every input topic and every output
//     topic the processor emits to, and, on a restart, Restore the checkpoint
//     committed last before anything else.
//  2. Seed every channel of the task with the offset the consumer will start
//     reading at (the committed offset) before the first Receive.
//  3. Pass every record the consumer returns, in the order returned, to
//     ReceiveHeader (or Receive, with a clock decoded by the caller). Treat an
//     error as fatal for the task: after ErrNodeFailed nothing the node holds
//     may be delivered or committed.
//  4. When the consumer reaches the end of a channel, or otherwise learns its
//     position without a record (a transaction marker at the end of a
//     partition), report it with Advance. This is what releases claims on
//     channels whose last offsets are not business records.
//  5. After every Receive or Advance, call Next until it reports false, and
//     run the processor on each delivery in the order returned. Stamp every
//     record the processor emits while handling a delivery with Stamp or
//     AppendStamp for its output topic, taken during that handling.
//  6. Commit, in one Kafka transaction, the emitted records, the offsets
//     from Committable and the bytes from Checkpoint, all taken at the same
//     moment. Never commit an offset beyond Committable: the records above it
//     have not been delivered.
//  7. If the transaction aborts or the task fails, discard the node and build
//     a new one from the committed checkpoint and offsets (duty 1 and 2);
//     never try to patch its state.
//  8. Do not rewind the consumer under a live node. Re-reading below a
//     channel's frontier is harmless (replays are dropped), but a record that
//     is above the frontier and not above the last one received is reported
//     as ErrOutOfOrder.
//
// # Bringing causality in from outside
//
// Producers outside the topology use a Session: it stamps each new record
// with the offsets of the records the session produced and the clocks of the
// records it consumed.
//
// docs/causal.md explains the design, why it is sound and live, and which
// test shows each claim.
package causal
