package csvcell

import "testing"

func TestGuardIsInertAndUnguardUndoesIt(t *testing.T) {
	for in, want := range map[string]string{
		"":                  "",
		"Ann":               "Ann",
		"'Tis":              "'Tis",
		"=HYPERLINK(\"x\")": "'=HYPERLINK(\"x\")",
		"+1":                "'+1",
		"-2+3":              "'-2+3",
		"@SUM(A1)":          "'@SUM(A1)",
		"\t=1":              "'\t=1",
		"\r=1":              "'\r=1",
		"'=1":               "''=1",
		"''@x":              "'''@x",
		"a=1":               "a=1",
	} {
		got := Guard(in)
		if got != want {
			t.Errorf("Guard(%q) = %q, want %q", in, got, want)
		}
		if got != "" && formulaStart(got[0]) {
			t.Errorf("Guard(%q) = %q still starts a formula", in, got)
		}
		if back := Unguard(got); back != in {
			t.Errorf("Unguard(Guard(%q)) = %q", in, back)
		}
	}
	if Unguard("'=x") != "=x" || Unguard("'Tis") != "'Tis" || Unguard("'") != "'" {
		t.Error("Unguard of a hand-written cell")
	}
}
