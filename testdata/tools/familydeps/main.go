// Command familydeps counts the pairs of file families of harnessd's
// package main that use each other's names, and fails when they are more
// than -max.
//
// A file's family is the part of its name before the first "_" (run.go and
// run_store.go are both "run"). Family A uses family B when a file of A
// names something (a function, type, method, field, variable or constant)
// that a file of B declares. The design wants dependencies to run one way,
// from the commands down to the leaves, so a pair that uses each other is a
// place where a lower layer reaches up.
//
//	go run ./testdata/tools/familydeps [-dir .] [-max N] [-v]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	dir := flag.String("dir", ".", "the directory of the package")
	maxPairs := flag.Int("max", -1, "fail when more pairs than this use each other (-1: no bound)")
	verbose := flag.Bool("v", false, "list, for each pair, how many names each side uses of the other")
	flag.Parse()
	uses, err := familyUses(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "familydeps:", err)
		os.Exit(2)
	}
	pairs := mutualPairs(uses)
	for _, p := range pairs {
		if *verbose {
			fmt.Printf("%s <-> %s  %d/%d\n", p[0], p[1], uses[p[0]][p[1]], uses[p[1]][p[0]])
		}
	}
	fmt.Printf("%d pairs of families use each other\n", len(pairs))
	if *maxPairs >= 0 && len(pairs) > *maxPairs {
		fmt.Fprintf(os.Stderr, "familydeps: %d pairs use each other, more than the bound of %d: the lower family of a new pair must not name the higher one (define a small interface in the lower family instead)\n", len(pairs), *maxPairs)
		os.Exit(1)
	}
}

// family returns the family of a file name: "run_store.go" is "run".
func family(name string) string {
	name = strings.TrimSuffix(filepath.Base(name), ".go")
	if i := strings.IndexByte(name, '_'); i >= 0 {
		return name[:i]
	}
	return name
}

// familyUses type-checks the non-test files of the package in dir and
// returns, for each family, how many distinct names it uses of each other
// family.
func familyUses(dir string) (map[string]map[string]int, error) {
	fset := token.NewFileSet()
	matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, path := range matches {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		if !buildsHere(f) {
			continue
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no Go files in %s", dir)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{
		Importer: importer.ForCompiler(fset, "source", nil),
		// Modules outside the standard library (the TOML decoder) cannot be
		// read by the source importer; the names of this package resolve
		// all the same, and those are the only ones counted.
		Error: func(error) {},
	}
	pkg, _ := conf.Check("main", fset, files, info)
	seen := map[[3]string]bool{}
	uses := map[string]map[string]int{}
	add := func(at token.Pos, obj types.Object) {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
			return
		}
		if _, local := obj.(*types.Var); local && obj.Parent() != nil && obj.Parent() != pkg.Scope() {
			return // a local variable or parameter
		}
		from, to := family(fset.File(at).Name()), family(fset.File(obj.Pos()).Name())
		if from == to {
			return
		}
		key := [3]string{from, to, fmt.Sprintf("%s:%d", fset.File(obj.Pos()).Name(), obj.Pos())}
		if seen[key] {
			return
		}
		seen[key] = true
		if uses[from] == nil {
			uses[from] = map[string]int{}
		}
		uses[from][to]++
	}
	for id, obj := range info.Uses {
		add(id.Pos(), obj)
	}
	for sel, s := range info.Selections {
		add(sel.Sel.Pos(), s.Obj())
	}
	return uses, nil
}

// buildsHere reports whether f's build constraint, if any, admits linux:
// the _other.go twins of platform files would count twice otherwise.
func buildsHere(f *ast.File) bool {
	for _, g := range f.Comments {
		if g.Pos() > f.Package {
			break
		}
		for _, c := range g.List {
			if strings.HasPrefix(c.Text, "//go:build ") && strings.Contains(c.Text, "!linux") {
				return false
			}
		}
	}
	return true
}

// mutualPairs returns the pairs of families that use each other, sorted.
func mutualPairs(uses map[string]map[string]int) [][2]string {
	var pairs [][2]string
	for a, tos := range uses {
		for b := range tos {
			if a < b && uses[b][a] > 0 {
				pairs = append(pairs, [2]string{a, b})
			}
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i][0] != pairs[j][0] {
			return pairs[i][0] < pairs[j][0]
		}
		return pairs[i][1] < pairs[j][1]
	})
	return pairs
}
