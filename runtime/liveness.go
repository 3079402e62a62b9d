package runtime

import (
	"fmt"
	"maps"
	"slices"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
)

// advanceIdle learns the position of channels that a blocked head waits
// on and that hold nothing: a partition whose last offsets are
// transaction markers only moves this way.
func (p *pump) advanceIdle() {
	waited := map[causal.Channel]bool{}
	for _, rt := range p.tasks.Tasks() {
		if rt.State() != StateRunning {
			continue
		}
		for _, st := range rt.Task().Status().Channels {
			if st.Blocked {
				waited[st.WaitingFor] = true
			}
		}
	}
	if len(waited) == 0 {
		return
	}
	// Where the pump has handed records out to (a channel with nothing new
	// since it was assigned stands where reading started), or further where
	// the consumer says so: past transaction markers, which no record
	// shows.
	position, err := p.consumer.Position(slices.Collect(maps.Keys(waited)))
	if err != nil {
		position = map[causal.Channel]int64{}
	}
	for ch := range waited {
		if r := p.tasks.Route(ch); r != nil {
			position[ch] = max(position[ch], r.Position()+1)
		}
	}
	for ch, off := range position {
		p.advance(ch, off)
	}
	if p.tasks.CheckBlocked(position) {
		p.fate.MustAbort()
	}
}

// backpressure pauses a partition whose hold queue, in some task, is over
// its bound, and resumes it once every queue is under half. A partition
// only failed tasks read is paused too. Empty queues are never the reason
// for a pause.
func (p *pump) backpressure() {
	var pause, resume []causal.Channel
	for ch, r := range p.tasks.Routes() {
		held, running := 0, false
		for _, rt := range r.Readers() {
			if rt.State() != StateRunning {
				continue
			}
			running = true
			for _, st := range rt.Task().Status().Channels {
				if st.Channel == ch {
					held = max(held, st.Held)
				}
			}
		}
		over := !running || held > p.maxHeld
		switch {
		case over && !p.paused[ch]:
			pause = append(pause, ch)
			p.setPaused(ch, true)
		case !over && p.paused[ch] && held <= p.maxHeld/2:
			resume = append(resume, ch)
			p.setPaused(ch, false)
		}
	}
	if len(pause) > 0 {
		if err := p.consumer.Pause(pause); err != nil {
			p.log.Warn("pause", zap.Error(err))
		}
	}
	if len(resume) > 0 {
		if err := p.consumer.Resume(resume); err != nil {
			p.log.Warn("resume", zap.Error(err))
		}
	}
}

// seek moves the consumer to where each channel must be read again from.
func (p *pump) seek(at map[causal.Channel]int64, why string) {
	for ch, off := range at {
		if err := p.consumer.Seek(ch, off); err != nil {
			p.fate.Stop(fmt.Errorf("rewind %s to offset %d for %s: %w", ch, off, why, err))
			return
		}
	}
	if len(at) > 0 {
		p.log.Debug("rewound channels", zap.Int("channels", len(at)), zap.String("for", why))
	}
}
