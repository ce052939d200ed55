package mailer

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A publisher who mistypes a template (the console's editor, PUT
// /api/templates, a sequence step) hears Go's own words otherwise:
// `template: welcome.txt:3:8: executing "welcome.txt" at <.Nmae>: can't
// evaluate field Nmae in type mailer.Data`. TemplateError tells it in
// theirs: the template, its part and the line as they wrote it, and what
// they may write there instead.

// TemplateError is a template mistake in plain words. It wraps Go's error.
type TemplateError struct {
	// Template is the template's name as the console lists it
	// ("welcome", "layout", "digest-issue"); Part is "text" or "HTML"
	// for a mail's ("" for one of one part); Line is the line of that
	// part (0: not known).
	Template, Part string
	Line           int
	// Msg says what is wrong and what would do.
	Msg string
	Err error
}

func (e *TemplateError) Error() string {
	where := "template " + e.Template
	if e.Part != "" {
		where += ", " + e.Part + " part"
	}
	if e.Line > 0 {
		where += ", line " + strconv.Itoa(e.Line)
	}
	return where + ": " + e.Msg
}

func (e *TemplateError) Unwrap() error { return e.Err }

// sparseError is a template that renders for a reader with every field
// but fails for one with little (sparseData).
type sparseError struct{ err error }

func (e *sparseError) Error() string { return e.err.Error() }
func (e *sparseError) Unwrap() error { return e.err }

// Go's template errors: at run time (exec), while parsing (parse), and
// html/template's escaping ones (escape).
var (
	execErrorRe   = regexp.MustCompile(`template: ([^:\s]+):(\d+):\d+: executing "[^"]*" at <.*?>: (.*)$`)
	parseErrorRe  = regexp.MustCompile(`template: ([^:\s]+):(\d+): (.*)$`)
	escapeErrorRe = regexp.MustCompile(`html/template:([^:\s]+):(\d+):(?:\d+:)? (.*)$`)
)

// explain is err in plain words when it is one of Go's template errors
// (a *TemplateError), else err. layoutLines is how many lines the
// layout has: a kind's HTML is parsed after it, so its lines count from
// there.
func explain(err error, layoutLines int) error {
	if err == nil {
		return nil
	}
	var done *TemplateError
	if errors.As(err, &done) {
		return err
	}
	text := err.Error()
	var m []string
	for _, re := range []*regexp.Regexp{execErrorRe, escapeErrorRe, parseErrorRe} {
		if m = re.FindStringSubmatch(text); m != nil {
			break
		}
	}
	if m == nil {
		return err
	}
	line, _ := strconv.Atoi(m[2])
	e := &TemplateError{Line: line, Msg: plainWords(m[3]), Err: err}
	e.Template, e.Part, e.Line = partOf(m[1], line, layoutLines)
	var sparse *sparseError
	if errors.As(err, &sparse) {
		e.Msg += " (for a reader with no name, custom fields or tags, and a mail with no items: test such a value with {{if}} or {{with}} first, or give it a fallback: {{.Name | default \"there\"}})"
	}
	return e
}

// partOf is the template, part and line that line of file (the name Go
// gives it) is.
func partOf(file string, line, layoutLines int) (template, part string, at int) {
	switch file {
	case DigestBodyTemplate:
		return TemplateDigestIssue, "", line
	case PostBodyTemplate:
		return TemplatePostIssue, "", line
	case "layout.html":
		return TemplateLayout, "", line
	}
	if kind, ok := strings.CutSuffix(file, ".txt"); ok {
		return kind, "text", line
	}
	kind, _ := strings.CutSuffix(file, ".html")
	if line <= layoutLines {
		return TemplateLayout, "", line
	}
	return kind, "HTML", line - layoutLines
}

// Go's words for a mistake (after "template: file:line:"), and ours.
var (
	noFieldRe    = regexp.MustCompile(`^can't evaluate field (\w+) in type (\S+)`)
	noFunctionRe = regexp.MustCompile(`^function "(\w+)" not defined`)
	argCountRe   = regexp.MustCompile(`^wrong number of args for (\w+): want (\d+) got (\d+)`)
	missingRe    = regexp.MustCompile(`^missing value for (\w+)`)
	noVariableRe = regexp.MustCompile(`^undefined variable "([^"]+)"`)
	noEntryRe    = regexp.MustCompile(`^map has no entry for key "([^"]+)"`)
)

// plainWords says Go's message msg as a publisher would.
func plainWords(msg string) string {
	if m := noFieldRe.FindStringSubmatch(msg); m != nil {
		prefix, fields := fieldsOf(m[2])
		return fmt.Sprintf("%q is not a field you can use here%s; fields: %s", m[1], didYouMean(m[1], prefix, fields), listFields(prefix, fields))
	}
	if m := noFunctionRe.FindStringSubmatch(msg); m != nil {
		prefix, fields := fieldsOf("mailer.Data")
		return fmt.Sprintf("%q is not a field or function you can use here%s; fields: %s; functions: %s",
			m[1], didYouMean(m[1], prefix, fields), listFields(prefix, fields), strings.Join(functionNames(), ", "))
	}
	if m := argCountRe.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("%s takes %s values here, it was given %s", m[1], m[2], m[3])
	}
	if m := missingRe.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("{{%s}} needs a value, such as {{%s .Name}}", m[1], m[1])
	}
	if m := noVariableRe.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("the variable %s is not set here: set it first ({{%s := .Name}})", m[1], m[1])
	}
	if m := noEntryRe.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("%q is not a field you can use here", m[1])
	}
	switch {
	case strings.HasPrefix(msg, "error calling index:") && strings.Contains(msg, "out of range"):
		return "the list has no such item here (a reader may have no tags, a mail no items): test it first, {{with .Subscriber.Tags}}{{index . 0}}{{end}}"
	case msg == "unexpected EOF":
		return "the template ends inside an action or a block: each {{if}}, {{range}}, {{with}} and {{define}} needs its {{end}}, and each {{ its }}"
	case msg == "unexpected {{end}}":
		return "this {{end}} closes nothing: remove it, or add the {{if}}, {{range}} or {{with}} it ends"
	case strings.HasPrefix(msg, "unclosed action"):
		return "an action opened with {{ is not closed with }}"
	}
	return msg
}

// templateTypes are the types templates see, by the name Go's errors
// give them, with where a template reaches each one's fields.
var templateTypes = map[string]struct {
	t      reflect.Type
	prefix string
}{
	"mailer.Data":       {reflect.TypeFor[Data](), "."},
	"mailer.Recipient":  {reflect.TypeFor[Recipient](), ".Subscriber."},
	"mailer.Newsletter": {reflect.TypeFor[Newsletter](), ".Newsletter."},
	"mailer.Invite":     {reflect.TypeFor[Invite](), ".Invite."},
	"mailer.Entry":      {reflect.TypeFor[Entry](), "."}, // an item's, in {{range .Entries}}
}

// hiddenFields are the fields of Data that are the service's own
// machinery, not a publisher's to show.
var hiddenFields = map[string]bool{"Reader": true}

// fieldsOf is the prefix and field names of the type Go's error names
// (Data's for one it does not).
func fieldsOf(typeName string) (prefix string, fields []string) {
	tt, ok := templateTypes[typeName]
	if !ok {
		tt = templateTypes["mailer.Data"]
	}
	for i := range tt.t.NumField() {
		if f := tt.t.Field(i); f.IsExported() && !hiddenFields[f.Name] {
			fields = append(fields, f.Name)
		}
	}
	return tt.prefix, fields
}

func listFields(prefix string, fields []string) string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = prefix + f
	}
	return strings.Join(out, ", ")
}

// didYouMean is " (did you mean <prefix+field>?)" for a field that name
// looks mistyped from: the same letters in another case or order, or one
// letter added, left out or typed wrong. Else "".
func didYouMean(name, prefix string, fields []string) string {
	sorted := func(s string) string {
		b := []byte(strings.ToLower(s))
		slices.Sort(b)
		return string(b)
	}
	for _, f := range fields {
		if sorted(name) == sorted(f) || editDistance(strings.ToLower(name), strings.ToLower(f)) <= 1 {
			return " (did you mean " + prefix + f + "?)"
		}
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// functionNames are the functions a mail's template may call: ours and
// text/template's own.
func functionNames() []string {
	names := slices.Collect(maps.Keys(templateFuncs))
	names = append(names, "and", "or", "not", "eq", "ne", "lt", "le", "gt", "ge", "len", "index", "slice", "print", "printf", "println", "urlquery")
	slices.Sort(names)
	return names
}
