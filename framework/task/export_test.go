package task

// StaleOutputs counts the outputs the task's outbox arrays still hold
// besides those not yet taken: outputs handed out by TakeOutputs, which
// keep their records' bytes reachable.
func (t *Task) StaleOutputs() int {
	n := 0
	for _, o := range append(t.outbox[len(t.outbox):cap(t.outbox)], t.spare[:cap(t.spare)]...) {
		if o.Record.Value != nil || o.Record.Headers != nil {
			n++
		}
	}
	return n
}
