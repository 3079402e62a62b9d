package runtime

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The shape the runtime keeps (docs/architecture.md): the stream thread is
// orchestration only, its parts own their verbs, no file grows without
// bound, and Kafka is reached through the transport seam, with one
// transaction discipline.
const (
	maxStreamThreadMethods = 30
	maxRuntimeFileLines    = 400
)

// shape is what the checks read of a tree of Go files (test files left
// out): methods by receiver type, lines by file, and where each import
// and each call of a method name occurs.
type shape struct {
	methods map[string]int
	lines   map[string]int
	imports map[string][]string // import path -> the directories importing it
	calls   map[string][]string // method name -> the directories calling it
}

// readShape reads the Go files under root, skipping test files.
func readShape(t *testing.T, root string) shape {
	t.Helper()
	s := shape{methods: map[string]int{}, lines: map[string]int{}, imports: map[string][]string{}, calls: map[string][]string{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		s.lines[rel] = strings.Count(string(src), "\n")
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			s.imports[p] = append(s.imports[p], dir)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Recv != nil && len(n.Recv.List) == 1 {
					s.methods[dir+"."+receiverType(n.Recv.List[0].Type)]++
				}
			case *ast.SelectorExpr:
				s.calls[n.Sel.Name] = append(s.calls[n.Sel.Name], dir)
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	return s
}

func receiverType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverType(e.X)
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// violations lists where s breaks the runtime's shape.
func (s shape) violations() []string {
	var out []string
	if n := s.methods["..StreamThread"]; n > maxStreamThreadMethods {
		out = append(out, "StreamThread has "+strconv.Itoa(n)+" methods, more than "+strconv.Itoa(maxStreamThreadMethods))
	}
	for f, n := range s.lines {
		if n > maxRuntimeFileLines {
			out = append(out, f+" has "+strconv.Itoa(n)+" lines")
		}
	}
	// The transport is the seam to Kafka; the embedded broker is kfake
	// itself (docs/architecture.md names the exceptions).
	for p, dirs := range s.imports {
		if !strings.HasPrefix(p, "github.com/twmb/franz-go") {
			continue
		}
		for _, d := range dirs {
			if d != "internal/transport" && d != "embedded" {
				out = append(out, d+" imports "+p)
			}
		}
	}
	for _, d := range s.calls["BeginTransaction"] {
		if d != "internal/transport" && d != "internal/txn" {
			out = append(out, d+" begins a transaction of its own")
		}
	}
	return out
}

func TestTheRuntimeKeepsItsShape(t *testing.T) {
	s := readShape(t, ".")
	require.NotZero(t, s.methods["..StreamThread"], "the files were read")
	assert.Empty(t, s.violations())
}

// The checks catch what they are for: a tree that breaks each rule.
func TestTheShapeChecksCatchEachBreak(t *testing.T) {
	write := func(t *testing.T, dir, name, src string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644))
	}
	var methods strings.Builder
	methods.WriteString("package runtime\n\ntype StreamThread struct{}\n")
	for i := range maxStreamThreadMethods + 1 {
		methods.WriteString("func (w *StreamThread) m" + strconv.Itoa(i) + "() {}\n")
	}
	cases := []struct {
		name  string
		build func(t *testing.T, root string)
		want  string
	}{
		{"too many methods", func(t *testing.T, root string) { write(t, root, "w.go", methods.String()) }, "StreamThread has 31 methods, more than 30"},
		{"a long file", func(t *testing.T, root string) {
			write(t, root, "long.go", "package runtime\n"+strings.Repeat("\n", maxRuntimeFileLines))
		}, "long.go has 401 lines"},
		{"franz-go beside the seam", func(t *testing.T, root string) {
			write(t, filepath.Join(root, "sinkworker"), "s.go", "package sinkworker\n\nimport _ \"github.com/twmb/franz-go/pkg/kgo\"\n")
		}, "sinkworker imports github.com/twmb/franz-go/pkg/kgo"},
		{"a transaction of its own", func(t *testing.T, root string) {
			write(t, filepath.Join(root, "connectworker"), "c.go", "package connectworker\n\nfunc f(p interface{ BeginTransaction() error }) { _ = p.BeginTransaction() }\n")
		}, "connectworker begins a transaction of its own"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			c.build(t, root)
			assert.Contains(t, readShape(t, root).violations(), c.want)
		})
	}
}
