package restore

import (
	"encoding/binary"
	"fmt"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/taskmgr"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

func (r *Restorer) localPositions(t *taskmgr.Task) (Positions, error) {
	b, err := t.Stores().Checkpoint()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUntrusted, err)
	}
	if len(b) == 0 {
		// Nothing known: a replay from the start leaves whatever the
		// stores hold as the changelog has it.
		return Positions{}, nil
	}
	pos, err := DecodePositions(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUntrusted, err)
	}
	return pos, nil
}

// positions is where t's stores on disk stand once restored, given where
// the restore left each changelog channel.
func (r *Restorer) positions(t *taskmgr.Task, at func(causal.Channel) int64) Positions {
	out := Positions{}
	for name, ch := range DiskChangelogs(r.App, r.Topology, r.OnDisk, t) {
		out[name] = at(ch)
	}
	return out
}

// DiskChangelogs is, per store of t kept on disk, its changelog channel.
func DiskChangelogs(app string, topo *framework.Topology, onDisk func(framework.StoreSpec) bool, t *taskmgr.Task) map[string]causal.Channel {
	out := map[string]causal.Channel{}
	info, _ := topo.Processor(t.Processor())
	for _, spec := range info.Stores {
		if onDisk(spec) {
			out[spec.Name] = causal.Channel{Topic: StoreChangelogTopic(app, spec.Name), Partition: t.Partition()}
		}
	}
	return out
}

// EndPositions is where each of the given changelog channels ends now.
func EndPositions(offsets transport.OffsetSource, chs map[string]causal.Channel) (Positions, error) {
	pos := Positions{}
	for name, ch := range chs {
		_, high, err := offsets.Watermarks(ch)
		if err != nil {
			return nil, fmt.Errorf("end of %s: %w", ch, err)
		}
		pos[name] = high
	}
	return pos, nil
}

// Positions is what a task's stores on disk keep beside their
// committed state: per store, an offset of its changelog partition below
// which the store holds every committed change. It may lag (a restore
// from it replays changes the store has, which leaves it as it was), but
// never lead.
type Positions map[string]int64

func (p Positions) Encode() []byte {
	b := binary.AppendUvarint([]byte{positionsVersion}, uint64(len(p)))
	for name, off := range p {
		b = appendString(b, name)
		b = binary.AppendUvarint(b, uint64(off))
	}
	return b
}

func DecodePositions(b []byte) (Positions, error) {
	if len(b) == 0 || b[0] != positionsVersion {
		return nil, fmt.Errorf("%w: store positions version", ErrBadChangelog)
	}
	n, l := binary.Uvarint(b[1:])
	if l <= 0 || n > uint64(len(b)) {
		return nil, ErrBadChangelog
	}
	b = b[1+l:]
	out := Positions{}
	for range n {
		var name string
		var err error
		if name, b, err = readString(b); err != nil {
			return nil, err
		}
		off, l := binary.Uvarint(b)
		if l <= 0 || off > 1<<62 {
			return nil, ErrBadChangelog
		}
		out[name], b = int64(off), b[l:]
	}
	return out, nil
}
