package csvimport

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
)

// The tags column (;-separated) and field.NAME columns are stored with
// each person added; a bad tag, an undeclared field or a value its type
// refuses rejects the line with the reason, and adds nobody.
func TestImportTagsAndFields(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBImport)
	st := store.NewRedis(rdb)
	ctx := context.Background()
	for _, d := range []store.FieldDef{{Name: "company", Type: store.FieldText}, {Name: "seats", Type: store.FieldNumber}} {
		if _, err := st.DefineField(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	file := "email,tags,field.company,field.seats,field.nope\n" +
		"a@example.com,beta; vip ;beta,Acme,12,\n" + // 2: stored
		"b@example.com,,,,\n" + // 3: no extras
		"c@example.com,Bad Tag,,,\n" + // 4: a bad tag
		"d@example.com,,,twelve,\n" + // 5: not a number
		"e@example.com,,,,x\n" // 6: an undeclared field
	lines, _ := CountLines(strings.NewReader(file))
	im := &Importer{Store: st}
	p, err := im.Run(ctx, strings.NewReader(file), lines, Progress{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Added != 2 || len(p.Rejected) != 3 {
		t.Fatalf("progress %+v", p)
	}
	for i, want := range []string{"bad tag", "is not a number", `no field "nope" is declared`} {
		if r := p.Rejected[i]; r.Line != int64(4+i) || !strings.Contains(r.Reason, want) {
			t.Errorf("rejected %+v, want line %d: %q", r, 4+i, want)
		}
	}
	a, err := st.Get(ctx, "a@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Tags, []string{"beta", "vip"}) || !maps.Equal(a.Fields, map[string]string{"company": "Acme", "seats": "12"}) {
		t.Fatalf("a: tags %v, fields %v", a.Tags, a.Fields)
	}
	if b, _ := st.Get(ctx, "b@example.com"); b.Tags != nil || b.Fields != nil {
		t.Fatalf("b: tags %v, fields %v", b.Tags, b.Fields)
	}
	for _, e := range []string{"c@example.com", "d@example.com", "e@example.com"} {
		if _, err := st.Get(ctx, e); err == nil {
			t.Fatalf("%s was added from a rejected line", e)
		}
	}
	if known, _ := st.KnownTags(ctx); !slices.Equal(known, []string{"beta", "vip"}) {
		t.Fatalf("known tags %v", known)
	}
	if n, err := st.SegmentCount(ctx, "tag:vip AND field.seats > 10"); err != nil || n.Active != 1 {
		t.Fatalf("the imported person in a segment: %+v %v", n, err)
	}
}
