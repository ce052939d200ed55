package console

import (
	"context"
	"regexp"

	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/services/presend"
	"github.com/newsletter/newsletter/store"
)

// ownChecker is the pre-send checks of a console given none: the
// renderer's mail and the settings' postal address, no link asked. nil
// without a renderer.
func ownChecker(d Deps) *issues.Checker {
	if d.Renderer == nil {
		return nil
	}
	c := &issues.Checker{Renderer: d.Renderer, Checks: &presend.Checker{}}
	if d.Settings != nil {
		c.PostalAddress = func(ctx context.Context) string { return d.Settings.Current(ctx).PostalAddress }
	}
	return c
}

// checkLines are is's pre-send checks for a page, with whether any is
// an error a send would refuse (the size guard's aside: force overrides
// it); a mail that cannot be rendered has none (the preview says why).
func (h *Handler) checkLines(ctx context.Context, is store.Issue) (rs []presend.Result, blocking bool) {
	if h.checker == nil {
		return nil, false
	}
	rs, err := h.checker.Run(ctx, is)
	if err != nil {
		return nil, false
	}
	for _, r := range presend.Errors(rs) {
		if r.Check != "size" {
			blocking = true
		}
	}
	return rs, blocking
}

// darkScheme matches the mail's dark-mode media features (the layout's
// prefers-color-scheme: dark), lightScheme its light ones. Each becomes
// a feature always (min-width: 0) or never (max-width: 0) true, valid
// wherever the feature stood in a query.
var (
	darkScheme  = regexp.MustCompile(`(?i)\(\s*prefers-color-scheme\s*:\s*dark\s*\)`)
	lightScheme = regexp.MustCompile(`(?i)\(\s*prefers-color-scheme\s*:\s*light\s*\)`)
)

// darkMode is html as a client in dark mode that honours the mail's
// prefers-color-scheme rules shows it: the dark rules always apply, the
// light ones never (at any real width). A sandboxed frame cannot be
// told the reader's scheme, so the preview rewrites the queries instead.
func darkMode(html string) string {
	html = darkScheme.ReplaceAllString(html, "(min-width:0)")
	return lightScheme.ReplaceAllString(html, "(max-width:0)")
}

// previewChecks fills in d the pre-send checks of what the page
// previews: the content f over the issue is, as a reader of the preview's
// topic gets it.
func (h *Handler) previewChecks(ctx context.Context, d *editorData, is store.Issue, f formContent) {
	if d.PreviewError != "" || d.PreviewTopic == "" {
		return
	}
	is.IssueContent = f.Content()
	if len(is.Topics) == 0 {
		is.Topics = []string{d.PreviewTopic}
	}
	d.Checks, d.ChecksBlock = h.checkLines(ctx, is)
}

// formContent is an issue form's content (form.Issue).
type formContent interface{ Content() store.IssueContent }
