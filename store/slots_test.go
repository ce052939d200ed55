package store_test

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/internal/testkit/slotcheck"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/store/storetest"
)

// crossSlotList is the list of the scripts, commands and transactions of
// the store whose keys are known to span more than one hash slot.
const crossSlotList = "testdata/crossslot.txt"

// TestCrossSlot runs the store's contract with slotcheck watching every
// command and compares what spans more than one hash slot (which Redis
// Cluster refuses with CROSSSLOT, and one Redis or miniredis does not)
// with crossSlotList. It is the ratchet of the move to Cluster (issue
// #30): it fails on anything new that crosses slots, and on anything
// listed that no longer does, so the list only shrinks.
//
// slotcheck sees a script's KEYS only: a script that builds key names
// itself (the subscriber scripts' records, bitmaps and indexes) crosses
// slots on a cluster without showing here.
func TestCrossSlot(t *testing.T) {
	check := slotcheck.New(slotcheck.ScriptNames(store.Scripts))
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) store.Store {
			c, _ := redistest.New(t, redistest.DBStore)
			c.AddHook(check.Hook())
			return store.NewRedis(c)
		},
	})
	if t.Failed() {
		// A contract test that stopped early did not send all it would
		// have: the list would be compared with part of the traffic.
		t.Fatal("the contract failed; the cross-slot list is not compared")
	}

	listed, err := readCrossSlotList(crossSlotList)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]slotcheck.Violation{}
	for _, v := range check.Violations() {
		found[v.Name] = v
	}
	var added, gone []string
	for name, v := range found {
		if _, ok := listed[name]; !ok {
			added = append(added, "\t"+v.String())
		}
	}
	for name := range listed {
		if _, ok := found[name]; !ok {
			gone = append(gone, "\t"+name)
		}
	}
	if len(added) == 0 && len(gone) == 0 {
		return
	}
	slices.Sort(added)
	slices.Sort(gone)
	var msg strings.Builder
	if len(added) > 0 {
		fmt.Fprintf(&msg, "these span more than one hash slot, which Redis Cluster refuses (CROSSSLOT); put their keys in one slot (a {hash tag}) or, if that is for later, add them to %s:\n%s\n",
			crossSlotList, strings.Join(added, "\n"))
	}
	if len(gone) > 0 {
		fmt.Fprintf(&msg, "these no longer span more than one slot: remove them from %s:\n%s\n",
			crossSlotList, strings.Join(gone, "\n"))
	}
	fmt.Fprintf(&msg, "the list as found (listed reasons kept; for a new one, say why it crosses):\n")
	for _, name := range slices.Sorted(maps.Keys(found)) {
		reason := listed[name]
		if reason == "" {
			reason = "NEW: " + strings.TrimPrefix(found[name].String(), name+" ")
		}
		fmt.Fprintf(&msg, "%s  # %s\n", name, reason)
	}
	t.Error(msg.String())
}

// readCrossSlotList reads the list: one name a line (as slotcheck names
// it), then "#" and why it crosses; blank lines and lines that start with
// "#" are comments.
func readCrossSlotList(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, _ := strings.Cut(line, "#")
		name = strings.TrimSpace(name)
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s:%d: %q listed twice", path, n, name)
		}
		out[name] = strings.TrimSpace(reason)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// TestScriptsNamed checks that store.Scripts (export_test.go), which
// names the scripts in TestCrossSlot's list, holds every script variable
// of the package: a script missing there would be listed by its SHA1,
// which changes with every edit of it.
func TestScriptsNamed(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var vars []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, v := range vs.Values {
					if makesScript(v) {
						vars = append(vars, vs.Names[i].Name)
					}
				}
			}
		}
	}
	if len(vars) == 0 {
		t.Fatal("found no script variables: has the way scripts are made changed?")
	}
	slices.Sort(vars)
	if named := slices.Sorted(maps.Keys(store.Scripts)); !slices.Equal(vars, named) {
		t.Errorf("the script variables are\n\t%q\nstore.Scripts (export_test.go) names\n\t%q", vars, named)
	}
}

// makesScript tells a call of redis.NewScript or of the package's
// subscriberScript, which wraps it.
func makesScript(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	switch fn := call.Fun.(type) {
	case *ast.Ident:
		return fn.Name == "subscriberScript"
	case *ast.SelectorExpr:
		x, ok := fn.X.(*ast.Ident)
		return ok && x.Name == "redis" && fn.Sel.Name == "NewScript"
	}
	return false
}
