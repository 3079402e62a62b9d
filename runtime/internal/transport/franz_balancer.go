package transport

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime/internal/assign"
)

// franzBalancer is the group's cooperative, co-partitioned and sticky
// balancer on franz-go (KIP-429): the tasks of assign, each a partition
// index of a group of co-partitioned topics, spread evenly over the
// members, each member keeping what it owns up to its share. A task that
// moves is left out of the first round's assignment; its owner revokes it
// and rejoins (kgo does that for a cooperative balancer), and the second
// round gives it to its new owner. So a member never runs a task another
// still runs, and a rebalance stops only the tasks that move.
//
// It also knows where state is: each member says, when it joins, which
// tasks' state it keeps a copy of and how far behind each copy is
// (Replicas.Report), and the assignment it hands out carries each
// member's standby and warm-up tasks besides its partitions (assign.Plan).
//
// Every member of a group must use it, with the same Replicas settings:
// the group refuses a member whose protocols have none in common with the
// others', and an eager member elected leader would break the cooperative
// rounds.
//
//causeway:owned
type franzBalancer struct {
	// groups are the co-partitioned groups of topics; a subscribed topic
	// in none is a group of its own.
	groups   [][]string
	replicas Replicas

	// mu guards got, the standby and warm-up tasks of the last
	// assignment this member received.
	mu  sync.Mutex
	got StandbyAssignment
}

// CooperativeProtocol is the group protocol name of Causeway's cooperative
// balancer.
const CooperativeProtocol = "causeway-cooperative"

var _ kgo.GroupBalancer = (*franzBalancer)(nil)

func (*franzBalancer) ProtocolName() string { return CooperativeProtocol }
func (*franzBalancer) IsCooperative() bool  { return true }

// franzTaskRecords is a task and a count of records, as members' join
// metadata carries them.
type franzTaskRecords struct {
	Topic     string `json:"t"`
	Partition int32  `json:"p"`
	Records   int64  `json:"n"`
}

// franzMemberState is the user data of a member's join metadata.
type franzMemberState struct {
	Process string             `json:"process,omitempty"`
	Copies  []franzTaskRecords `json:"copies,omitempty"`
	Sizes   []franzTaskRecords `json:"sizes,omitempty"`
}

// franzStandbys is the user data of a member's assignment.
type franzStandbys struct {
	Standby []causal.Channel `json:"standby,omitempty"`
	Warmup  []causal.Channel `json:"warmup,omitempty"`
}

func taskRecords(m map[causal.Channel]int64) []franzTaskRecords {
	out := make([]franzTaskRecords, 0, len(m))
	for ch, n := range m {
		out = append(out, franzTaskRecords{Topic: ch.Topic, Partition: ch.Partition, Records: n})
	}
	slices.SortFunc(out, func(a, b franzTaskRecords) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// JoinGroupMetadata is the consumer protocol's metadata (version 3): the
// topics, what the member owns at which generation, and, as user data,
// the state it keeps.
func (b *franzBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = interests
	meta.Generation = generation
	for _, topic := range slices.Sorted(maps.Keys(current)) {
		owned := kmsg.NewConsumerMemberMetadataOwnedPartition()
		owned.Topic, owned.Partitions = topic, current[topic]
		meta.OwnedPartitions = append(meta.OwnedPartitions, owned)
	}
	if b.replicas.Report != nil {
		r := b.replicas.Report()
		// A struct of slices and ints always encodes.
		meta.UserData, _ = json.Marshal(franzMemberState{Process: r.Process, Copies: taskRecords(r.Copies), Sizes: taskRecords(r.Sizes)})
	}
	return meta.AppendTo(nil)
}

// ParseSyncAssignment reads this member's partitions, and keeps its
// standby and warm-up tasks for Standbys.
func (b *franzBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(assignment); err != nil {
		return nil, err
	}
	var s franzStandbys
	if len(a.UserData) > 0 {
		if err := json.Unmarshal(a.UserData, &s); err != nil {
			return nil, err
		}
	}
	b.mu.Lock()
	b.got = StandbyAssignment{Standby: s.Standby, Warmup: s.Warmup, Version: b.got.Version + 1}
	b.mu.Unlock()
	m := make(map[string][]int32, len(a.Topics))
	for _, t := range a.Topics {
		m[t.Topic] = t.Partitions
	}
	return m, nil
}

// standbys returns the standby part of the last assignment received.
func (b *franzBalancer) standbys() StandbyAssignment {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.got
}

func (b *franzBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(b, members)
	if err != nil {
		return nil, nil, err
	}
	return cb, cb.MemberTopics(), nil
}

// Balance plans the assignment of topics (by partition count) to cb's
// members; see franzBalancer.
func (b *franzBalancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	groups := b.groupsOf(topics)
	tasks := assign.Tasks(groups, topics)
	group := map[string]int{} // by first topic
	for i, g := range groups {
		group[g[0]] = i
	}
	task := func(r franzTaskRecords) (assign.Task, bool) {
		g, ok := group[r.Topic]
		return assign.Task{Group: g, Partition: r.Partition}, ok && r.Partition < topics[r.Topic]
	}
	o := assign.Options{Standbys: b.replicas.Standbys, AcceptableLag: b.replicas.AcceptableLag, MaxWarmups: b.replicas.MaxWarmups,
		Stateless: map[int]bool{}, Sizes: map[assign.Task]int64{}}
	for first, stateless := range b.replicas.Stateless {
		if g, ok := group[first]; ok && stateless {
			o.Stateless[g] = true
		}
	}
	var members []assign.Member
	joined := map[string]*kmsg.JoinGroupResponseMember{}
	cb.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		joined[m.MemberID] = m
		am := assign.Member{ID: m.MemberID, Generation: meta.Generation, Copies: map[assign.Task]int64{}}
		var state franzMemberState
		if len(meta.UserData) > 0 && json.Unmarshal(meta.UserData, &state) != nil {
			state = franzMemberState{} // a member that says nothing readable keeps no copies
		}
		am.Process = state.Process
		for _, r := range state.Copies {
			if t, ok := task(r); ok {
				am.Copies[t] = r.Records
			}
		}
		for _, r := range state.Sizes {
			if t, ok := task(r); ok {
				o.Sizes[t] = max(o.Sizes[t], r.Records)
			}
		}
		// A task is owned by the member that owns every partition of it.
		owns := map[string]map[int32]bool{}
		for _, op := range meta.OwnedPartitions {
			owns[op.Topic] = map[int32]bool{}
			for _, p := range op.Partitions {
				owns[op.Topic][p] = true
			}
		}
		for _, t := range tasks {
			whole := true
			for _, topic := range groups[t.Group] {
				whole = whole && (t.Partition >= topics[topic] || owns[topic][t.Partition])
			}
			if whole {
				am.Owned = append(am.Owned, t)
			}
		}
		members = append(members, am)
	})
	plan := cb.NewPlan()
	extra := map[string]franzStandbys{}
	named := func(ts []assign.Task) []causal.Channel {
		var out []causal.Channel
		for _, t := range ts {
			out = append(out, causal.Channel{Topic: groups[t.Group][0], Partition: t.Partition})
		}
		return out
	}
	for id, a := range assign.Plan(tasks, members, o) {
		for _, t := range a.Active {
			for _, topic := range groups[t.Group] {
				if t.Partition < topics[topic] {
					plan.AddPartition(joined[id], topic, t.Partition)
				}
			}
		}
		extra[id] = franzStandbys{Standby: named(a.Standby), Warmup: named(a.Warmup)}
	}
	plan.AdjustCooperative(cb)
	return franzPlan{plan: plan, extra: extra}
}

// franzPlan is a balance plan with each member's standby and warm-up
// tasks, which go in its assignment's user data.
type franzPlan struct {
	plan  *kgo.BalancePlan
	extra map[string]franzStandbys
}

func (p franzPlan) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	out := p.plan.IntoSyncAssignment()
	for i := range out {
		x, ok := p.extra[out[i].MemberID]
		if !ok || len(x.Standby)+len(x.Warmup) == 0 {
			continue
		}
		var a kmsg.ConsumerMemberAssignment
		if a.ReadFrom(out[i].MemberAssignment) != nil {
			continue // kgo's own encoding: it reads back
		}
		a.UserData, _ = json.Marshal(x)
		out[i].MemberAssignment = a.AppendTo(nil)
	}
	return out
}

// groupsOf is the co-partitioned groups of the topics being balanced: the
// balancer's groups cut down to those topics, and every other topic on its
// own.
func (b *franzBalancer) groupsOf(topics map[string]int32) [][]string {
	var sets [][]string
	covered := map[string]bool{}
	for _, g := range b.groups {
		var set []string
		for _, t := range g {
			if _, ok := topics[t]; ok {
				set = append(set, t)
				covered[t] = true
			}
		}
		if len(set) > 0 {
			sets = append(sets, set)
		}
	}
	for t := range topics {
		if !covered[t] {
			sets = append(sets, []string{t})
		}
	}
	return assign.Groups(sets)
}
