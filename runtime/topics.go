package runtime

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/causeway-stream/causeway/runtime/internal/restore"

	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
)

// topicAdmin is what the topic manager asks of the cluster.
type topicAdmin interface {
	PartitionCounts(ctx context.Context) (map[string]int32, error)
	CreateTopics(ctx context.Context, specs []transport.TopicSpec) error
}

// topicManager makes sure the topics a topology uses exist: it creates the
// internal ones (and, when asked, sources and outputs) and checks
// co-partitioning.
//
//causeway:owned
type topicManager struct {
	admin topicAdmin
	topo  *framework.Topology
	cfg   Config
	log   *zap.Logger
	// deadLetter is the dead-letter topic, created when missing.
	deadLetter string
	// waiting hears which topics the manager waits for (nil: none any
	// more). Default: nobody.
	waiting func(missing []string)
}

// ensureTopics reads the partition counts of every topic the topology uses,
// creating what is missing and allowed, and checks co-partitioning.
func (tm topicManager) ensureTopics(ctx context.Context) (map[string]int32, error) {
	admin := tm.admin
	counts, err := admin.PartitionCounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("read cluster metadata: %w", err)
	}
	var create []transport.TopicSpec
	want := func(name string, partitions int32, configs map[string]string) {
		if _, ok := counts[name]; ok {
			return
		}
		create = append(create, transport.TopicSpec{Name: name, Partitions: partitions, Configs: configs})
		counts[name] = partitions
	}
	topics := tm.topo.Topics()
	switch {
	case tm.topo.DeadLetterTopic() != "":
		// Named by the application: created like its other topics.
		topics = append(topics, framework.TopicInfo{Name: tm.topo.DeadLetterTopic()})
	case tm.deadLetter != "":
		// The worker's own, for records an operator skips.
		topics = append(topics, framework.TopicInfo{Name: tm.deadLetter, Internal: true})
	}
	for _, ti := range topics {
		if l := tm.topo.LogicalTopic(ti.Name); l != ti.Name && counts[l] > 0 {
			tm.log.Warn("a topic has the name this application's internal topic had before internal topics carried the application id; "+
				"this worker reads only the new one, so records an earlier Causeway left in the old one are not read "+
				"(see docs/operations.md, upgrading)", zap.String("old", l), zap.String("new", ti.Name))
		}
	}
	var missing []string
	for _, ti := range topics {
		switch {
		case ti.Internal:
			want(ti.Name, tm.topo.PartitionCount(ti.Name, counts, int32(tm.cfg.DefaultPartitions)), nil)
		case tm.cfg.CreateTopics:
			n := ti.Partitions
			if n == 0 {
				n = int32(tm.cfg.DefaultPartitions)
			}
			want(ti.Name, n, nil)
		default:
			if _, ok := counts[ti.Name]; !ok {
				missing = append(missing, ti.Name)
			}
		}
	}
	if err := tm.awaitMissing(ctx, missing, counts); err != nil {
		return nil, err
	}
	if legacy := restore.LegacyChangelogTopic(tm.cfg.ApplicationID); counts[legacy] > 0 {
		return nil, fmt.Errorf("%w: topic %q holds this application's state in the layout of an earlier Causeway, "+
			"one changelog for every store and checkpoint; this one keeps a changelog per store and a checkpoint topic per processor, "+
			"and does not read the old one. Reprocess under a new --application-id, or delete the application's internal topics "+
			"and its workers' state directories to start it over", ErrLegacyState, legacy)
	}
	compacted := map[string]string{"cleanup.policy": "compact"}
	// Where each worker says what it runs, for queries to find it.
	want(membersTopic(tm.cfg.ApplicationID), 1, compacted)
	for _, p := range tm.topo.Processors() {
		tasks := counts[p.Inputs[0]]
		configs := map[string]map[string]string{restore.CheckpointTopic(tm.cfg.ApplicationID, p.Name): compacted}
		for _, s := range p.Stores {
			configs[restore.StoreChangelogTopic(tm.cfg.ApplicationID, s.Name)] = changelogConfig(s)
		}
		for name, cfg := range configs {
			want(name, tasks, cfg)
			if counts[name] < tasks {
				return nil, fmt.Errorf("state topic %q has %d partitions, processor %q needs %d", name, counts[name], p.Name, tasks)
			}
		}
	}
	if len(create) > 0 {
		if err := admin.CreateTopics(ctx, create); err != nil {
			return nil, fmt.Errorf("create topics: %w", err)
		}
		for _, s := range create {
			tm.log.Info("created topic", zap.String("topic", s.Name), zap.Int32("partitions", s.Partitions))
		}
		if err := waitForTopics(ctx, admin, create); err != nil {
			return nil, err
		}
	}
	if err := tm.topo.CheckPartitions(counts); err != nil {
		return nil, err
	}
	return counts, nil
}

// awaitMissing waits for the topics missing (none: it returns at once),
// and adds their partition counts to counts, keeping those planned there.
func (tm topicManager) awaitMissing(ctx context.Context, missing []string, counts map[string]int32) error {
	if len(missing) == 0 {
		return nil
	}
	fresh, err := tm.awaitTopics(ctx, missing)
	if err != nil {
		return err
	}
	for t, n := range fresh {
		if _, planned := counts[t]; !planned {
			counts[t] = n
		}
	}
	return nil
}

// awaitTopics waits, up to Config.TopicWaitTimeout, for the topics
// missing to exist, looking every second, and returns the partition
// counts once they do.
func (tm topicManager) awaitTopics(ctx context.Context, missing []string) (map[string]int32, error) {
	giveUp := fmt.Errorf("topics %v do not exist: create them, or run with --create-topics", missing)
	if tm.cfg.TopicWaitTimeout <= 0 {
		return nil, giveUp
	}
	tm.log.Warn("waiting for topics that do not exist: create them, or run with --create-topics",
		zap.Strings("topics", missing), zap.Duration("timeout", tm.cfg.TopicWaitTimeout))
	deadline := time.NewTimer(tm.cfg.TopicWaitTimeout)
	defer deadline.Stop()
	for {
		if tm.waiting != nil {
			tm.waiting(missing)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (%w)", giveUp, ctx.Err())
		case <-deadline.C:
			return nil, fmt.Errorf("%w (waited %s, --topic-wait-timeout)", giveUp, tm.cfg.TopicWaitTimeout)
		case <-time.After(time.Second):
		}
		counts, err := tm.admin.PartitionCounts(ctx)
		if err != nil {
			continue
		}
		missing = slices.DeleteFunc(missing, func(t string) bool { _, ok := counts[t]; return ok })
		if len(missing) == 0 {
			if tm.waiting != nil {
				tm.waiting(nil)
			}
			tm.log.Info("the topics waited for exist")
			return counts, nil
		}
		giveUp = fmt.Errorf("topics %v do not exist: create them, or run with --create-topics", missing)
	}
}

func waitForTopics(ctx context.Context, admin topicAdmin, specs []transport.TopicSpec) error {
	for {
		counts, err := admin.PartitionCounts(ctx)
		if err == nil {
			ready := true
			for _, s := range specs {
				if counts[s.Name] < s.Partitions {
					ready = false
				}
			}
			if ready {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for created topics: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// windowChangelogSlack is how much longer than its store a window store's
// changelog keeps records, as Kafka Streams does: a day.
const windowChangelogSlack = 24 * time.Hour

// changelogConfig is the topic configuration of a store's changelog: a
// key-value store's is compacted; a window store with retention forgets
// old windows by time too, since the store drops them without a record.
func changelogConfig(s framework.StoreSpec) map[string]string {
	if s.Kind == framework.WindowKind && s.Retention > 0 {
		return map[string]string{"cleanup.policy": "compact,delete",
			"retention.ms": strconv.FormatInt((s.Retention + windowChangelogSlack).Milliseconds(), 10)}
	}
	return map[string]string{"cleanup.policy": "compact"}
}
