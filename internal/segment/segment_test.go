package segment

import (
	"errors"
	"strings"
	"testing"
)

// The tree follows the precedence (NOT over AND over OR), parentheses
// and quoting; keywords in any case.
func TestParseShapes(t *testing.T) {
	for src, want := range map[string]string{
		"topic:updates AND tag:beta AND NOT tag:paid AND joined > 2026-01-01": "(((topic:updates & tag:beta) & !tag:paid) & joined>2026-01-01)",
		"tag:a OR tag:b AND tag:c":            "(tag:a | (tag:b & tag:c))",
		"(tag:a or tag:b) and not (tag:c)":    "((tag:a | tag:b) & !tag:c)",
		`field.company = "Big \"Co\""`:        `field:company=Big "Co"`,
		"field.seats>=10 AND field.seats!=12": "(field:seats>=10 & field:seats!=12)",
		"NOT NOT status:active":               "!!status:active",
	} {
		e, err := Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := show(e.Root); got != want {
			t.Errorf("%s:\n got %s\nwant %s", src, got, want)
		}
	}
}

func show(n Node) string {
	switch n := n.(type) {
	case *And:
		return "(" + show(n.L) + " & " + show(n.R) + ")"
	case *Or:
		return "(" + show(n.L) + " | " + show(n.R) + ")"
	case *Not:
		return "!" + show(n.X)
	case *Term:
		if n.Op == "" {
			return string(n.Kind) + ":" + n.Name
		}
		return string(n.Kind) + strings.TrimSuffix(":"+n.Name, ":") + n.Op + n.Value
	}
	return "?"
}

// Errors say what is wrong and where (1-based characters).
func TestParseErrors(t *testing.T) {
	for src, want := range map[string]struct {
		pos int
		msg string
	}{
		"":                           {0, "empty"},
		"tag:a AND":                  {10, "a term is missing"},
		"tag:a tag:b":                {7, "AND or OR expected"},
		"(tag:a OR tag:b":            {16, `")" expected to close the "(" at position 1`},
		"tag:a)":                     {6, `")" without its "("`},
		"tag:":                       {1, "a name is missing"},
		"field.seats 3":              {13, "a comparison"},
		"field.seats >":              {14, "a value expected"},
		"joined ! 2026-01-01":        {8, `"!" alone`},
		`field.x = "open`:            {11, "never ends"},
		"topics:a":                   {1, "is no term"},
		"tag:a OR OR tag:b":          {10, "a term expected"},
		"été AND tag:a":              {1, "is no term"},
		"tag:a AND é":                {11, "is no term"},
		strings.Repeat("(", 60) + "": {51, "nested more than"},
		strings.Repeat("tag:a OR ", MaxTerms) + "tag:b": {9*MaxTerms + 1, "more than 50 terms"},
	} {
		_, err := Parse(src)
		var e *Error
		if !errors.As(err, &e) || e.Pos != want.pos || !strings.Contains(e.Msg, want.msg) {
			t.Errorf("%q: %v, want position %d and %q", src, err, want.pos, want.msg)
		}
	}
	if _, err := Parse(strings.Repeat("tag:a OR ", 300) + "tag:a"); err == nil {
		t.Error("an expression past MaxLength parsed")
	}
}

// Check holds the names and the values against the schema.
func TestCheck(t *testing.T) {
	s := Schema{Topics: []string{"updates"}, Tags: []string{"beta"}, Statuses: []string{"active", "pending"},
		Fields: map[string]FieldType{"seats": {Type: "number"}, "renews": {Type: "date"}, "company": {Type: "text"},
			"plan": {Type: "choice", Choices: []string{"free", "pro"}}}}
	ok := "topic:updates AND tag:beta AND status:pending AND field.seats > 2.5 AND field.renews <= 2026-02-01 AND field.company != x AND field.plan = pro AND joined >= 2026-01-01"
	if e, err := Parse(ok); err != nil || e.Check(s) != nil {
		t.Fatalf("%s: %v %v", ok, err, e.Check(s))
	}
	for src, want := range map[string]string{
		"topic:nope":              "no topic",
		"tag:a AND tag:nope":      "no tag",
		"status:gone":             "no status",
		"field.nope = 1":          "no field",
		"field.seats = many":      "is a number",
		"field.renews > tomorrow": "is a date",
		"field.company < x":       "only = and !=",
		"field.plan = gold":       "not one of its choices",
		"field.plan > free":       "only = and !=",
		"joined > yesterday":      "a date YYYY-MM-DD",
	} {
		e, err := Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		err = e.Check(s)
		var se *Error
		if !errors.As(err, &se) || se.Pos == 0 || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
}

// A value compares by its field's type; no value satisfies != alone.
func TestCompare(t *testing.T) {
	for _, c := range []struct {
		typ, have, op, value string
		want                 bool
	}{
		{"number", "9", "<", "10", true}, // as numbers, not strings
		{"number", "10", ">=", "10.0", true},
		{"date", "2026-01-02", ">", "2026-01-01", true},
		{"text", "Acme", "=", "acme", false},
		{"text", "", "!=", "x", true},
		{"number", "", "<", "10", false},
		{"choice", "pro", "!=", "free", true},
	} {
		if got := Compare(c.typ, c.have, c.op, c.value); got != c.want {
			t.Errorf("%+v: %v", c, got)
		}
	}
}
