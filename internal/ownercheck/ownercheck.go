// Package ownercheck is a go/analysis pass that keeps a part's state its
// own: the fields of a struct type whose declaration carries the comment
// line
//
//	//causeway:owned
//
// may be written only by the type's own methods and by the functions that
// make one (that return one, or a pointer to one).
// Unexported fields keep other packages out; this pass keeps the other
// parts of the same package out, which the compiler cannot.
//
// A write is an assignment or an increment of the field, of an element
// of it (x.f[k] = v, x.f.g = v), or a delete or clear of it. Calls of the
// field's methods are not writes: a part that hands its state to another
// through a method call is the part's own choice.
package ownercheck

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/inspector"
)

// Directive marks a struct type as owned.
const Directive = "//causeway:owned"

// Analyzer reports writes to an owned type's fields from outside its
// methods and constructors.
var Analyzer = &analysis.Analyzer{
	Name:     "ownercheck",
	Doc:      "report writes to the fields of a //causeway:owned type outside its methods and constructors",
	Requires: []*analysis.Analyzer{inspect.Analyzer},
	Run:      run,
}

func run(pass *analysis.Pass) (any, error) {
	owned := ownedTypes(pass)
	if len(owned) == 0 {
		return nil, nil
	}
	ins := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)
	ins.WithStack([]ast.Node{(*ast.AssignStmt)(nil), (*ast.IncDecStmt)(nil), (*ast.CallExpr)(nil)}, func(n ast.Node, push bool, stack []ast.Node) bool {
		if !push {
			return true
		}
		var targets []ast.Expr
		switch n := n.(type) {
		case *ast.AssignStmt:
			if n.Tok != token.DEFINE {
				targets = n.Lhs
			}
		case *ast.IncDecStmt:
			targets = []ast.Expr{n.X}
		case *ast.CallExpr:
			if id, ok := ast.Unparen(n.Fun).(*ast.Ident); ok && len(n.Args) > 0 {
				if b, ok := pass.TypesInfo.Uses[id].(*types.Builtin); ok && (b.Name() == "delete" || b.Name() == "clear") {
					targets = n.Args[:1]
				}
			}
		}
		for _, e := range targets {
			checkWrite(pass, owned, e, enclosingFunc(stack))
		}
		return true
	})
	return nil, nil
}

// ownedTypes returns the package's struct types marked owned.
func ownedTypes(pass *analysis.Pass) map[*types.TypeName]bool {
	owned := map[*types.TypeName]bool{}
	for _, f := range pass.Files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				if !marked(doc) {
					continue
				}
				if tn, ok := pass.TypesInfo.Defs[ts.Name].(*types.TypeName); ok {
					owned[tn] = true
				}
			}
		}
	}
	return owned
}

func marked(doc *ast.CommentGroup) bool {
	if doc == nil {
		return false
	}
	for _, c := range doc.List {
		if strings.TrimSpace(c.Text) == Directive {
			return true
		}
	}
	return false
}

// checkWrite reports e if it writes a field of an owned type from outside
// that type's methods and constructors.
func checkWrite(pass *analysis.Pass, owned map[*types.TypeName]bool, e ast.Expr, fn *ast.FuncDecl) {
	for {
		switch x := ast.Unparen(e).(type) {
		case *ast.SelectorExpr:
			if sel, ok := pass.TypesInfo.Selections[x]; ok && sel.Kind() == types.FieldVal {
				if tn := ownerOf(sel.Recv()); tn != nil && owned[tn] && !allowed(pass, fn, tn) {
					pass.Reportf(x.Sel.Pos(), "%s.%s is written outside the methods of %s", tn.Name(), x.Sel.Name, tn.Name())
					return
				}
			}
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		default:
			return
		}
	}
}

// ownerOf is the named struct type a field selection's receiver is, or
// points to.
func ownerOf(t types.Type) *types.TypeName {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := t.(*types.Named); ok {
		return n.Origin().Obj()
	}
	return nil
}

// allowed reports whether fn may write the fields of tn: it is a method
// of tn, or makes one (it returns a tn or a pointer to one).
func allowed(pass *analysis.Pass, fn *ast.FuncDecl, tn *types.TypeName) bool {
	if fn == nil {
		return false
	}
	if fn.Recv != nil && len(fn.Recv.List) == 1 {
		if ownerOf(pass.TypesInfo.TypeOf(fn.Recv.List[0].Type)) == tn {
			return true
		}
	}
	if fn.Type.Results != nil {
		for _, r := range fn.Type.Results.List {
			if ownerOf(pass.TypesInfo.TypeOf(r.Type)) == tn {
				return true
			}
		}
	}
	return false
}

// enclosingFunc is the function declaration the innermost node of stack
// is in; a function literal belongs to the declaration around it.
func enclosingFunc(stack []ast.Node) *ast.FuncDecl {
	for i := len(stack) - 1; i >= 0; i-- {
		if fd, ok := stack[i].(*ast.FuncDecl); ok {
			return fd
		}
	}
	return nil
}
