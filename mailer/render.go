package mailer

import (
	"cmp"
	"embed"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	texttemplate "text/template"
	"text/template/parse"
)

//go:embed templates
var embedded embed.FS

// Entry is one line of a digest or an event bundle.
type Entry struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Summary string `json:"summary,omitempty"`
}

// Data is what templates see.
type Data struct {
	Email      string
	Name       string
	ConfirmURL string
	// UnsubscribeURL leaves the mail's topic (the List-Unsubscribe
	// target); PreferencesURL opens the preference centre (the footer's
	// link).
	UnsubscribeURL string
	PreferencesURL string
	// Topic is the name of the mail's topic ("Weekly digest"), for the
	// footer; ListID its List-Id header ("" : the service's).
	Topic  string
	ListID string
	// ReplyTo, when set, is the mail's Reply-To (an issue's own).
	ReplyTo string
	Period  string
	Entries []Entry
	// An issue's: its subject, preheader (the inbox's preview line,
	// hidden in the HTML) and body, rendered once per issue
	// (RenderMarkdown).
	Subject   string
	Preheader string
	IssueHTML htmltemplate.HTML
	IssueText string
	// ArchiveURL is the issue's page in the public archive ("view in
	// the browser"); empty when one of its topics is private.
	ArchiveURL string
	// Reader is the reader's part of the counted links' tokens
	// (internal/engage): it takes the place of ReaderMark wherever the
	// shared parts (an issue's rewritten body) carry it.
	Reader string
	// Subscriber is the reader with their custom fields and tags:
	// {{.Subscriber.Fields.company}}. A field they have no value of is
	// "", so {{or .Subscriber.Fields.company "there"}} or
	// {{.Subscriber.Fields.company | default "there"}} falls back.
	Subscriber Recipient
	// Newsletter is who sends it (the settings in effect): the layout's
	// logo, name, accent colour and postal address; From and ReplyTo go
	// into the mail's header.
	Newsletter Newsletter
	// Invite is the console invite's (KindInvite), empty in other mails.
	Invite Invite
}

// Invite is what the console's invite mail says: who invited (the
// inviting account's name), the role, the one-time link and when it
// stops working ("2006-01-02 15:04 UTC").
type Invite struct {
	By, Role, Link, Expires string
}

// Newsletter is the newsletter's own side of a mail (store.Settings as
// the templates see it; every field may be empty).
type Newsletter struct {
	Name, Description, PostalAddress, LogoURL string
	// Accent is a #rrggbb colour (settings.Check) for links and buttons.
	Accent htmltemplate.CSS
	// From and ReplyTo are header values ("Name <addr>"); empty: the
	// sender's own From, no Reply-To.
	From, ReplyTo string
}

// Recipient is the reader as templates see them (Data.Subscriber).
type Recipient struct {
	Email, Name string
	Fields      map[string]string
	Tags        []string
}

// templateFuncs are the functions every template may call beside the
// built-in ones.
var templateFuncs = map[string]any{
	// default is its first argument when the second (a pipeline's
	// value) is empty: {{.Subscriber.Fields.company | default "there"}}.
	"default": func(fallback string, v any) any {
		if s, ok := v.(string); (ok && s == "") || v == nil {
			return fallback
		}
		return v
	},
}

// layoutFuncs give the HTML layout what html/template would otherwise
// strip: Outlook for Windows ignores max-width, so it alone is given a
// fixed 600 px table inside conditional comments, which are HTML comments
// to every other client.
var layoutFuncs = htmltemplate.FuncMap{
	"outlookOpen": func() htmltemplate.HTML {
		return `<!--[if mso]><table role="presentation" width="600" cellpadding="0" cellspacing="0" border="0" align="center"><tr><td><![endif]-->`
	},
	"outlookClose": func() htmltemplate.HTML { return `<!--[if mso]></td></tr></table><![endif]-->` },
	// Outlook for Windows renders at the screen's DPI unless told 96:
	// at 120 DPI and more it scales the logo and the 600 px table up.
	"outlookSettings": func() htmltemplate.HTML {
		return `<!--[if mso]><noscript><xml><o:OfficeDocumentSettings><o:AllowPNG/><o:PixelsPerInch>96</o:PixelsPerInch></o:OfficeDocumentSettings></xml></noscript><![endif]-->`
	},
}

// ReaderMark stands for the reader's part of a counted link in the
// shared parts of a mail (the issue's body, rewritten once per issue);
// every render puts Data.Reader in its place. Letters and digits only, so
// no escaper changes it.
const ReaderMark = "nlreadermark0"

// Renderer makes every kind of mail from its templates. Its templates can
// be replaced while it is in use (Replace: the console's edits reach the
// workers without a restart); a mail, or a Prepared, is made from one set
// throughout.
type Renderer struct {
	cur atomic.Pointer[templates]
}

// templates are one parsed set of templates for every kind.
type templates struct {
	text map[string]*texttemplate.Template
	html map[string]*htmltemplate.Template
	// preparable: the kind's templates allow Prepare's fill-in (prepare.go).
	preparable map[string]bool
	// entries: the kind's templates show .Entries (UsesEntries).
	entries map[string]bool
	// digestBody makes the weekly digest issue's Markdown
	// (digestissue.go).
	digestBody *texttemplate.Template
	// postBody makes the Markdown of a feed entry's issue (postissue.go).
	postBody *texttemplate.Template
	// limit is the most bytes one part may be (renderlimit.go; 0:
	// MaxRenderBytes).
	limit int
}

// partLimit is the most bytes one part of a mail may be.
func (r *templates) partLimit() int { return cmp.Or(r.limit, MaxRenderBytes) }

// TemplateText is a template written at run time (store.Template): the
// KIND.txt and the KIND.html, or the layout's HTML. An empty part is
// taken from the folder or the built-in templates.
type TemplateText struct{ Text, HTML string }

// The names of the templates that are not a kind's: the layout around
// every HTML part, and the Markdown of the digest's and of a feed entry's
// issue.
const (
	TemplateLayout      = "layout"
	TemplateDigestIssue = "digest-issue"
	TemplatePostIssue   = "post-issue"
)

// TemplateNames are the names of the built-in templates one can edit:
// every kind's, then the layout and the issue bodies.
func TemplateNames() []string {
	return append(Kinds(), TemplateLayout, TemplateDigestIssue, TemplatePostIssue)
}

// storedPart is the stored text for the template file name (KIND.txt,
// KIND.html, layout.html, digest.md, post.md), when one is stored.
func storedPart(stored map[string]TemplateText, file string) (string, bool) {
	var part string
	switch file {
	case "layout.html":
		part = stored[TemplateLayout].HTML
	case DigestBodyTemplate:
		part = stored[TemplateDigestIssue].Text
	case PostBodyTemplate:
		part = stored[TemplatePostIssue].Text
	default:
		kind, ext, _ := strings.Cut(file, ".")
		if ext == "html" {
			part = stored[kind].HTML
		} else {
			part = stored[kind].Text
		}
	}
	return part, part != ""
}

// ReadDir reads the files of an operator's template folder that replace
// built-in ones or are steps' (names: TemplateNames and steps), for the
// catalog's first import. Missing files are left out.
func ReadDir(dir string, steps ...string) (map[string]TemplateText, error) {
	out := map[string]TemplateText{}
	if dir == "" {
		return out, nil
	}
	files := map[string][2]string{
		TemplateLayout:      {"", "layout.html"},
		TemplateDigestIssue: {DigestBodyTemplate, ""},
		TemplatePostIssue:   {PostBodyTemplate, ""},
	}
	for _, k := range append(Kinds(), steps...) {
		files[k] = [2]string{k + ".txt", k + ".html"}
	}
	for name, f := range files {
		var t TemplateText
		for i, file := range f {
			if file == "" {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, file))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("read template %s: %w", file, err)
			}
			if i == 0 {
				t.Text = string(b)
			} else {
				t.HTML = string(b)
			}
		}
		if t != (TemplateText{}) {
			out[name] = t
		}
	}
	return out, nil
}

// Sources are where templates come from, first match wins: Stored (by
// kind, or "layout" for layout.html; the console's), Dir (an operator's
// folder, NEWSLETTER_TEMPLATE_DIR), then the built-in ones.
type Sources struct {
	Stored map[string]TemplateText
	Dir    string
}

// NewRenderer parses the embedded templates of every kind and of the
// sequence's steps. A file of the same name in overrideDir (KIND.txt,
// KIND.html, layout.html, digest.md or post.md) replaces the embedded one, so an operator can
// restyle mails without a rebuild; a step's template may exist only there.
// Errors name the file.
func NewRenderer(overrideDir string, steps ...string) (*Renderer, error) {
	return Compile(Sources{Dir: overrideDir}, steps...)
}

// Compile is NewRenderer over src.
func Compile(src Sources, steps ...string) (*Renderer, error) {
	t, err := parseTemplates(src, steps...)
	if err != nil {
		return nil, err
	}
	r := &Renderer{}
	r.cur.Store(t)
	return r, nil
}

// Replace puts n's templates in effect in r: mails begun before go on with
// the ones they started with.
func (r *Renderer) Replace(n *Renderer) { r.cur.Store(n.cur.Load()) }

// UsesEntries reports whether the templates of kind (a sequence step's, an
// operator's override) show .Entries, so that a sender reads the items
// only for the mails that list them.
func (r *Renderer) UsesEntries(kind string) bool { return r.cur.Load().entries[kind] }

// templatedKinds are the kinds made from templates around the layout:
// the readers' kinds, the console's invite (built in only: it is no
// reader's mail, but it wears the newsletter's layout) and the steps.
func templatedKinds(steps []string) []string {
	return append(append(Kinds(), KindInvite), steps...)
}

// Invite builds the console's invite to inv's address, in the layout of
// nl (the settings in effect).
func (r *Renderer) Invite(to string, inv Invite, nl Newsletter) (*Message, error) {
	return r.cur.Load().render(KindInvite, Data{Email: to, Invite: inv, Newsletter: nl})
}

// Render builds the message of kind for d.Email.
func (r *Renderer) Render(kind string, d Data) (*Message, error) {
	return r.cur.Load().render(kind, d)
}

// Prepare starts a Prepared for kind with the fields all recipients
// share; its per-recipient fields are ignored. It keeps the templates in
// effect now for all its mails.
func (r *Renderer) Prepare(kind string, shared Data) (*Prepared, error) {
	return r.cur.Load().Prepare(kind, shared)
}

// DigestIssue is the subject and Markdown body of period's digest issue
// (digestissue.go).
func (r *Renderer) DigestIssue(period string, entries []Entry) (subject, body string, err error) {
	return r.cur.Load().DigestIssue(period, entries)
}

// PostIssue is the subject and Markdown body of a feed entry's issue
// (postissue.go).
func (r *Renderer) PostIssue(e Entry) (subject, body string, err error) {
	return r.cur.Load().PostIssue(e)
}

func parseTemplates(src Sources, steps ...string) (*templates, error) {
	files := templateFiles{src}
	layout, err := files.read("layout.html")
	if err != nil {
		return nil, err
	}
	r := &templates{text: map[string]*texttemplate.Template{}, html: map[string]*htmltemplate.Template{}, preparable: map[string]bool{}, entries: map[string]bool{}}
	for _, k := range templatedKinds(steps) {
		if _, done := r.text[k]; done {
			continue // the welcome is a kind and the first step
		}
		if err := r.parseKind(files, k, layout); err != nil {
			return nil, err
		}
	}
	md, err := files.read(DigestBodyTemplate)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", DigestBodyTemplate, err)
	}
	if r.digestBody, err = parseDigestBody(md); err != nil {
		return nil, err
	}
	post, err := files.read(PostBodyTemplate)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", PostBodyTemplate, err)
	}
	if r.postBody, err = parsePostBody(post); err != nil {
		return nil, err
	}
	return r, nil
}

// templateFiles finds a template's text: the catalog's stored one, else
// the template folder's file, else the built-in one.
type templateFiles struct{ src Sources }

func (f templateFiles) read(name string) (string, error) {
	if stored, ok := storedPart(f.src.Stored, name); ok {
		return stored, nil
	}
	if f.src.Dir != "" {
		b, err := os.ReadFile(filepath.Join(f.src.Dir, name))
		if err == nil {
			return string(b), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("read template %s: %w", name, err)
		}
	}
	b, err := embedded.ReadFile("templates/" + name)
	return string(b), err
}

// missing names where a template was looked for: a catalog's (stored
// texts, no folder) are written in the console or the API, files in the
// template folder.
func (f templateFiles) missing(file string) error {
	if f.src.Stored != nil && f.src.Dir == "" {
		return fmt.Errorf("template %s: none saved and none built in: give the step a subject and a body, or save a template of its name", file)
	}
	return fmt.Errorf("template %s: not in NEWSLETTER_TEMPLATE_DIR (%s) nor built in", file, f.src.Dir)
}

// readPart is file's text, or missing's error when there is none.
func (f templateFiles) readPart(file string) (string, error) {
	text, err := f.read(file)
	if errors.Is(err, fs.ErrNotExist) {
		return "", f.missing(file)
	}
	return text, err
}

// parseKind parses kind k's text and HTML templates (the HTML inside
// layout) into r, and notes what a render of them needs.
func (r *templates) parseKind(files templateFiles, k, layout string) error {
	txt, err := files.readPart(k + ".txt")
	if err != nil {
		return err
	}
	// missingkey=zero: the only maps a template indexes are the
	// reader's fields, and a field they have no value of is "" (a
	// fallback's to replace), not an error nor "<no value>".
	if r.text[k], err = texttemplate.New(k + ".txt").Option("missingkey=zero").Funcs(templateFuncs).Parse(txt); err != nil {
		return fmt.Errorf("parse template %s.txt: %w", k, err)
	}
	body, err := files.readPart(k + ".html")
	if err != nil {
		return err
	}
	h := htmltemplate.New(k + ".html").Option("missingkey=zero").Funcs(templateFuncs).Funcs(layoutFuncs)
	// The subject comes from the text template, where it is defined
	// once; the HTML title needs it too.
	subject := r.text[k].Lookup("subject")
	if subject == nil {
		return fmt.Errorf("template %s.txt: no {{define \"subject\"}}", k)
	}
	if _, err := h.Parse(layout + body + `{{define "subject"}}` + subject.Root.String() + `{{end}}`); err != nil {
		return fmt.Errorf("parse template %s.html: %w", k, err)
	}
	r.html[k] = h
	var trees []*parse.Tree
	for _, t := range r.text[k].Templates() {
		trees = append(trees, t.Tree)
	}
	trees = append(trees, htmlTrees(h)...)
	// A reader's fields are filled in by a full render: Prepare fills
	// only the fields of personal.
	r.preparable[k] = preparable(trees...) && !usesField("Subscriber", trees...)
	r.entries[k] = usesField("Entries", trees...)
	return nil
}

// usesField reports whether any of trees refers to .name.
func usesField(name string, trees ...*parse.Tree) bool {
	return anyNode(func(n parse.Node) bool {
		f, ok := n.(*parse.FieldNode)
		return ok && len(f.Ident) > 0 && f.Ident[0] == name
	}, trees...)
}

// anyNode reports whether any node of trees (actions, their pipelines and
// arguments, the branches of if, range and with, template calls) is one
// match says yes to.
func anyNode(match func(parse.Node) bool, trees ...*parse.Tree) bool {
	found := false
	var walk func(n parse.Node)
	walk = func(n parse.Node) {
		if found || n == nil {
			return
		}
		if match(n) {
			found = true
			return
		}
		switch n := n.(type) {
		case *parse.ChainNode:
			walk(n.Node)
		case *parse.ListNode:
			if n != nil {
				for _, c := range n.Nodes {
					walk(c)
				}
			}
		case *parse.ActionNode:
			walk(n.Pipe)
		case *parse.PipeNode:
			if n != nil {
				for _, c := range n.Cmds {
					walk(c)
				}
			}
		case *parse.CommandNode:
			for _, a := range n.Args {
				walk(a)
			}
		case *parse.IfNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.TemplateNode:
			walk(n.Pipe)
		}
	}
	for _, t := range trees {
		if t != nil {
			walk(t.Root)
		}
	}
	return found
}

func (r *templates) render(kind string, d Data) (*Message, error) {
	txt, ok := r.text[kind]
	if !ok {
		return nil, fmt.Errorf("render: unknown mail kind %q", kind)
	}
	subj, err := execCapped(txt, "subject", d, r.partLimit())
	if err != nil {
		return nil, fmt.Errorf("render %s subject: %w", kind, err)
	}
	text, err := execCapped(txt, txt.Name(), d, r.partLimit())
	if err != nil {
		return nil, fmt.Errorf("render %s text: %w", kind, err)
	}
	htmlPart, err := execCapped(r.html[kind], "layout", d, r.partLimit())
	if err != nil {
		return nil, fmt.Errorf("render %s html: %w", kind, err)
	}
	if d.Reader != "" {
		text = strings.ReplaceAll(text, ReaderMark, d.Reader)
		htmlPart = strings.ReplaceAll(htmlPart, ReaderMark, d.Reader)
	}
	return &Message{
		Kind:           kind,
		To:             d.Email,
		Subject:        strings.Join(strings.Fields(subj), " "),
		Text:           text,
		HTML:           htmlPart,
		UnsubscribeURL: d.UnsubscribeURL,
		ListID:         d.ListID,
		From:           d.Newsletter.From,
		ReplyTo:        cmp.Or(d.ReplyTo, d.Newsletter.ReplyTo),
	}, nil
}
