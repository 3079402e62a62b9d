package task

// The context a processor is handed: forwarding and emitting, its
// stores, and schedules.

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/store"
)

// taskContext is the framework.Context handed to the processor.
type taskContext struct{ t *Task }

var _ framework.Context = (*taskContext)(nil)

func (c *taskContext) Forward(rec framework.Record) error {
	for _, o := range c.t.outputs {
		if err := c.t.emit(o, rec); err != nil {
			return err
		}
	}
	return nil
}

func (c *taskContext) Emit(topic string, rec framework.Record) error {
	for _, o := range c.t.outputs {
		if o.name == topic {
			return c.t.emit(o, rec)
		}
	}
	return fmt.Errorf("processor %q: %w: %q", c.t.info.Name, framework.ErrUnknownOutput, topic)
}

func (c *taskContext) KeyValueStore(name string) (store.KeyValue, error) {
	if g, ok := c.t.globals[name]; ok {
		return g, nil
	}
	m, ok := c.t.kv[name]
	if !ok || c.t.specs[name].Kind != framework.KeyValueKind {
		return nil, fmt.Errorf("processor %q: %w: key-value store %q", c.t.info.Name, framework.ErrUnknownStore, name)
	}
	return m, nil
}

func (c *taskContext) WindowStore(name string) (store.Window, error) {
	w, ok := c.t.windows[name]
	if !ok {
		return nil, fmt.Errorf("processor %q: %w: window store %q", c.t.info.Name, framework.ErrUnknownStore, name)
	}
	return w, nil
}

func (c *taskContext) VersionedStore(name string) (store.Versioned, error) {
	v, ok := c.t.versioned[name]
	if !ok {
		return nil, fmt.Errorf("processor %q: %w: versioned store %q", c.t.info.Name, framework.ErrUnknownStore, name)
	}
	return v, nil
}

func (c *taskContext) Schedule(interval time.Duration, typ framework.PunctuationType, fn framework.Punctuator) (framework.Cancel, error) {
	if interval <= 0 {
		return nil, fmt.Errorf("schedule: interval %v must be positive", interval)
	}
	if fn == nil {
		return nil, errors.New("schedule: nil punctuator")
	}
	return c.t.schedule(interval, typ, fn), nil
}

// schedule adds a punctuation schedule, and returns what cancels it.
func (t *Task) schedule(interval time.Duration, typ framework.PunctuationType, fn framework.Punctuator) framework.Cancel {
	t.nextID++
	s := &schedule{id: t.nextID, interval: interval, typ: typ, fn: fn}
	now := t.stream
	if typ == framework.WallClockTime {
		now = t.cfg.Now()
	}
	if !now.IsZero() {
		s.next, s.anchored = now.Add(interval), true
	}
	t.schedules = append(t.schedules, s)
	return func() {
		t.schedules = slices.DeleteFunc(t.schedules, func(x *schedule) bool { return x == s })
	}
}

func (c *taskContext) StreamTime() time.Time { return c.t.stream }
func (c *taskContext) TaskID() string        { return c.t.id }
func (c *taskContext) Partition() int32      { return c.t.cfg.Partition }
func (c *taskContext) Outputs() []string {
	topics := make([]string, len(c.t.outputs))
	for i, o := range c.t.outputs {
		topics[i] = o.name
	}
	return topics
}

func (c *taskContext) Report(ev framework.DropEvent) { c.t.cfg.Observer.Dropped(c.t.id, ev) }
