package runtime

import (
	"maps"
	"slices"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
)

// advanceIdle learns the position of channels that a blocked head waits
// on and that hold nothing: a partition whose last offsets are
// transaction markers only moves this way.
func (w *StreamThread) advanceIdle() {
	waited := map[causal.Channel]bool{}
	for _, rt := range w.tasks.Tasks() {
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
	position, err := w.consumer.Position(slices.Collect(maps.Keys(waited)))
	if err != nil {
		position = map[causal.Channel]int64{}
	}
	for ch := range waited {
		if r := w.tasks.Route(ch); r != nil {
			position[ch] = max(position[ch], r.Position()+1)
		}
	}
	for ch, off := range position {
		w.pump.advance(ch, off)
	}
	if w.tasks.CheckBlocked(position) {
		w.fate.MustAbort()
	}
}

// backpressure pauses a partition whose hold queue, in some task, is over
// its bound, and resumes it once every queue is under half. A partition
// only failed tasks read is paused too. Empty queues are never the reason
// for a pause.
func (w *StreamThread) backpressure() {
	p := &w.pump
	var pause, resume []causal.Channel
	for ch, r := range w.tasks.Routes() {
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
		over := !running || held > w.cfg.MaxHeldPerChannel
		switch {
		case over && !p.paused[ch]:
			pause = append(pause, ch)
			p.setPaused(ch, true)
		case !over && p.paused[ch] && held <= w.cfg.MaxHeldPerChannel/2:
			resume = append(resume, ch)
			p.setPaused(ch, false)
		}
	}
	if len(pause) > 0 {
		if err := w.consumer.Pause(pause); err != nil {
			w.log.Warn("pause", zap.Error(err))
		}
	}
	if len(resume) > 0 {
		if err := w.consumer.Resume(resume); err != nil {
			w.log.Warn("resume", zap.Error(err))
		}
	}
}
