package transport

import (
	"context"
	"errors"
	"fmt"

	"github.com/causeway-stream/causeway/causal"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// franzAdmin is the admin client on kgo.
type franzAdmin struct {
	adm   *kadm.Client
	group string
}

func (a *franzAdmin) PartitionCounts(ctx context.Context) (map[string]int32, error) {
	ctx, cancel := context.WithTimeout(ctx, franzRequestTimeout)
	defer cancel()
	details, err := a.adm.ListTopics(ctx)
	if err != nil {
		return nil, franzError(err)
	}
	counts := map[string]int32{}
	for name, t := range details {
		if t.Err == nil {
			counts[name] = int32(len(t.Partitions))
		}
	}
	return counts, nil
}

func (a *franzAdmin) ClusterID(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, franzRequestTimeout)
	defer cancel()
	md, err := a.adm.BrokerMetadata(ctx)
	if err != nil {
		return "", franzError(err)
	}
	return md.Cluster, nil
}

func (a *franzAdmin) CreateTopics(ctx context.Context, specs []TopicSpec) error {
	for _, s := range specs {
		configs := map[string]*string{}
		for k, v := range s.Configs {
			configs[k] = &v
		}
		res, err := a.adm.CreateTopic(ctx, s.Partitions, -1, configs, s.Name)
		if err == nil {
			err = res.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %q: %w", s.Name, franzError(err))
		}
	}
	return nil
}

func (a *franzAdmin) GroupCommitted(ctx context.Context, chs []causal.Channel) (map[causal.Channel]int64, error) {
	return franzGroupOffsets(ctx, a.adm, a.group, chs)
}

func (a *franzAdmin) Ends(ctx context.Context, chs []causal.Channel) (map[causal.Channel]int64, error) {
	var topics []string
	for _, ch := range chs {
		topics = append(topics, ch.Topic)
	}
	ends, err := a.adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("end offsets: %w", franzError(err))
	}
	out := make(map[causal.Channel]int64, len(chs))
	for _, ch := range chs {
		end, err := franzListed(ends, ch)
		if err != nil {
			return nil, fmt.Errorf("end offset of %s: %w", ch, err)
		}
		out[ch] = end
	}
	return out, nil
}

func (a *franzAdmin) Close() {}
