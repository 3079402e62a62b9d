package connectworker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A source's topics are made as KIP-158's settings say: by the first
// group of topic.creation.groups that includes the topic and does not
// exclude it, else by the default group, each with its partitions and
// topic settings; wrong settings are named.
func TestTopicCreationGroupsChooseHowATopicIsMade(t *testing.T) {
	tc, errs := parseTopicCreation(map[string]string{
		"topic.creation.default.partitions": "2", "topic.creation.default.replication.factor": "-1", "topic.creation.default.retention.ms": "1000",
		"topic.creation.groups":            "compacted,big",
		"topic.creation.compacted.include": "state\\..*, users", "topic.creation.compacted.exclude": "state\\.tmp.*",
		"topic.creation.compacted.cleanup.policy": "compact",
		"topic.creation.big.include":              ".*", "topic.creation.big.partitions": "8",
	})
	require.Empty(t, errs)
	tests := []struct {
		topic      string
		group      string
		partitions int32
		configs    map[string]string
	}{
		{"state.orders", "compacted", 2, map[string]string{"cleanup.policy": "compact"}},
		{"users", "compacted", 2, map[string]string{"cleanup.policy": "compact"}},
		{"state.tmp1", "big", 8, map[string]string{}},
		{"clicks", "big", 8, map[string]string{}},
	}
	for _, tt := range tests {
		g := tc.spec(tt.topic)
		assert.Equal(t, tt.group, g.name, tt.topic)
		assert.Equal(t, tt.partitions, g.partitions, tt.topic)
		assert.Equal(t, tt.configs, g.configs, tt.topic)
	}
	only, errs := parseTopicCreation(map[string]string{"topic.creation.default.retention.ms": "1000"})
	require.Empty(t, errs)
	assert.Equal(t, topicGroup{name: "default", partitions: 1, configs: map[string]string{"retention.ms": "1000"}}, only.spec("x"))

	_, errs = parseTopicCreation(map[string]string{"topic.creation.groups": "g,default", "topic.creation.g.partitions": "0",
		"topic.creation.h.include": "x", "topic.creation.default.replication.factor": "3"})
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	assert.ElementsMatch(t, []string{
		`setting "topic.creation.groups": "default" is the group of every other topic: it cannot be listed`,
		`setting "topic.creation.g.partitions": "0" is not a whole number, at least 1`,
		`setting "topic.creation.g.include": is required for a group of topic.creation.groups`,
		`setting "topic.creation.h.include": "h" is not a group of topic.creation.groups`,
		`setting "topic.creation.default.replication.factor": only "-1" is served: topics are made with the broker's default replication factor`,
	}, got)
}
