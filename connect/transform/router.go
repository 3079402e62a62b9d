package transform

import (
	"regexp"

	"github.com/causeway-stream/causeway/connect"
)

// router is RegexRouter.
type router struct {
	re          *regexp.Regexp
	replacement string
}

// javaGroup finds Java's $1 group references, to write them as Go's ${1}.
var javaGroup = regexp.MustCompile(`\$(\d+)`)

func newRouter(s settings, _ bool) (Transform, error) {
	expr, field := s.get("regex"), s.key("regex")
	if expr == "" {
		return nil, &connect.FieldError{Field: field, Reason: "is required"}
	}
	re, err := regexp.Compile("^(?:" + expr + ")$")
	if err != nil {
		return nil, &connect.FieldError{Field: field, Reason: err.Error()}
	}
	return router{re: re, replacement: javaGroup.ReplaceAllString(s.get("replacement"), "$${$1}")}, nil
}

func (t router) Apply(r Record) (Record, error) {
	if t.re.MatchString(r.Topic) {
		r.Topic = t.re.ReplaceAllString(r.Topic, t.replacement)
	}
	return r, nil
}
