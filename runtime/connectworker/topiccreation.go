package connectworker

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/causeway-stream/causeway/connect"
)

// topicCreation is how a source makes the topics it writes, from its
// topic.creation.* settings (KIP-158): the groups in the order
// topic.creation.groups names them, each with the topics it includes and
// excludes, then the default group, which takes every other topic.
type topicCreation struct {
	groups []topicGroup
	def    topicGroup
}

// topicGroup is one topic-creation group: the topics it makes, with
// their partitions and topic settings.
type topicGroup struct {
	name             string
	include, exclude []*regexp.Regexp
	partitions       int32
	configs          map[string]string
}

// parseTopicCreation reads the topic.creation.* settings of cfg. Its
// errors name the setting.
func parseTopicCreation(cfg map[string]string) (topicCreation, []*connect.FieldError) {
	var tc topicCreation
	var errs []*connect.FieldError
	names := connect.SplitList(cfg["topic.creation.groups"])
	group := func(name string) topicGroup {
		g := topicGroup{name: name, configs: map[string]string{}}
		prefix := "topic.creation." + name + "."
		for k, v := range cfg {
			setting, ok := strings.CutPrefix(k, prefix)
			if !ok {
				continue
			}
			switch setting {
			case "include", "exclude":
				for _, expr := range connect.SplitList(v) {
					re, err := regexp.Compile("^(?:" + expr + ")$")
					if err != nil {
						errs = append(errs, &connect.FieldError{Field: k, Reason: err.Error()})
						continue
					}
					if setting == "include" {
						g.include = append(g.include, re)
					} else {
						g.exclude = append(g.exclude, re)
					}
				}
			case "partitions":
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					errs = append(errs, &connect.FieldError{Field: k, Reason: fmt.Sprintf("%q is not a whole number, at least 1", v)})
				}
				g.partitions = int32(n)
			case "replication.factor":
				if v != "-1" {
					errs = append(errs, &connect.FieldError{Field: k, Reason: `only "-1" is served: topics are made with the broker's default replication factor`})
				}
			default: // a topic setting, for the broker to check
				g.configs[setting] = v
			}
		}
		return g
	}
	tc.def = group("default")
	if tc.def.partitions == 0 {
		tc.def.partitions = 1
	}
	for _, name := range names {
		if name == "default" {
			errs = append(errs, &connect.FieldError{Field: "topic.creation.groups", Reason: `"default" is the group of every other topic: it cannot be listed`})
			continue
		}
		g := group(name)
		if len(g.include) == 0 {
			errs = append(errs, &connect.FieldError{Field: "topic.creation." + name + ".include", Reason: "is required for a group of topic.creation.groups"})
		}
		if g.partitions == 0 {
			g.partitions = tc.def.partitions
		}
		tc.groups = append(tc.groups, g)
	}
	for k := range cfg {
		rest, ok := strings.CutPrefix(k, "topic.creation.")
		if !ok || rest == "groups" {
			continue
		}
		name, _, _ := strings.Cut(rest, ".")
		if name != "default" && !slices.Contains(names, name) {
			errs = append(errs, &connect.FieldError{Field: k, Reason: fmt.Sprintf("%q is not a group of topic.creation.groups", name)})
		}
	}
	return tc, errs
}

// spec is the group that makes topic: the first whose include matches it
// and whose exclude does not, else the default.
func (tc topicCreation) spec(topic string) topicGroup {
	for _, g := range tc.groups {
		if matchesAny(g.include, topic) && !matchesAny(g.exclude, topic) {
			return g
		}
	}
	return tc.def
}

func matchesAny(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}
