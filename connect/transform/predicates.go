package transform

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/framework"
)

// predicate says whether a transform applies to a record.
type predicate interface {
	test(r Record) bool
}

// parsePredicates makes the predicates cfg names under "predicates".
func parsePredicates(cfg map[string]string) (map[string]predicate, []error) {
	out := map[string]predicate{}
	var errs []error
	for _, name := range connect.SplitList(cfg["predicates"]) {
		s := settings{cfg: cfg, prefix: "predicates." + name + "."}
		switch typ := strings.TrimPrefix(s.get("type"), "org.apache.kafka.connect.transforms.predicates."); typ {
		case "TopicNameMatches":
			re, err := regexp.Compile("^(?:" + s.get("pattern") + ")$")
			switch {
			case s.get("pattern") == "":
				errs = append(errs, s.missing("pattern"))
			case err != nil:
				errs = append(errs, &connect.FieldError{Field: s.key("pattern"), Reason: err.Error()})
			default:
				out[name] = topicMatches{re: re}
			}
		case "HasHeaderKey":
			if s.get("name") == "" {
				errs = append(errs, s.missing("name"))
				continue
			}
			out[name] = hasHeader{name: s.get("name")}
		case "RecordIsTombstone":
			out[name] = tombstone{}
		case "":
			errs = append(errs, s.missing("type"))
		default:
			errs = append(errs, &connect.FieldError{Field: s.key("type"), Reason: fmt.Sprintf("%q is not a predicate Causeway has (TopicNameMatches, HasHeaderKey, RecordIsTombstone)", s.get("type"))})
		}
	}
	return out, errs
}

// topicMatches is TopicNameMatches: the topic matches pattern whole.
type topicMatches struct{ re *regexp.Regexp }

func (p topicMatches) test(r Record) bool { return p.re.MatchString(r.Topic) }

// hasHeader is HasHeaderKey.
type hasHeader struct{ name string }

func (p hasHeader) test(r Record) bool {
	return slices.ContainsFunc(r.Headers, func(h framework.Header) bool { return h.Key == p.name })
}

// tombstone is RecordIsTombstone.
type tombstone struct{}

func (tombstone) test(r Record) bool { return r.Value == nil }

// filter is Filter: it drops every record it applies to.
type filter struct{}

func (filter) Apply(r Record) (Record, error) { return r, connect.ErrFiltered }
