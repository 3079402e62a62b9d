package transport

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
// Every member of a group must use it: the group refuses a member whose
// protocols have none in common with the others', and an eager member
// elected leader would break the cooperative rounds.
type franzBalancer struct {
	// groups are the co-partitioned groups of topics; a subscribed topic
	// in none is a group of its own.
	groups [][]string
}

// CooperativeProtocol is the group protocol name of Causeway's cooperative
// balancer.
const CooperativeProtocol = "causeway-cooperative"

var _ kgo.GroupBalancer = (*franzBalancer)(nil)

func (*franzBalancer) ProtocolName() string { return CooperativeProtocol }
func (*franzBalancer) IsCooperative() bool  { return true }

// JoinGroupMetadata is the consumer protocol's metadata (version 3): the
// topics, and what the member owns at which generation.
func (*franzBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = interests
	meta.Generation = generation
	for _, topic := range slices.Sorted(maps.Keys(current)) {
		owned := kmsg.NewConsumerMemberMetadataOwnedPartition()
		owned.Topic, owned.Partitions = topic, current[topic]
		meta.OwnedPartitions = append(meta.OwnedPartitions, owned)
	}
	return meta.AppendTo(nil)
}

func (*franzBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	return kgo.ParseConsumerSyncAssignment(assignment)
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
	// A task is owned by the member that owns every partition of it.
	var members []assign.Member
	joined := map[string]*kmsg.JoinGroupResponseMember{}
	cb.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		joined[m.MemberID] = m
		owns := map[string]map[int32]bool{}
		for _, o := range meta.OwnedPartitions {
			owns[o.Topic] = map[int32]bool{}
			for _, p := range o.Partitions {
				owns[o.Topic][p] = true
			}
		}
		am := assign.Member{ID: m.MemberID, Generation: meta.Generation}
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
	for id, ts := range assign.Balance(tasks, members) {
		for _, t := range ts {
			for _, topic := range groups[t.Group] {
				if t.Partition < topics[topic] {
					plan.AddPartition(joined[id], topic, t.Partition)
				}
			}
		}
	}
	plan.AdjustCooperative(cb)
	return plan
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
