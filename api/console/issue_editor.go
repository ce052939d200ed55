package console

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/newsletter/newsletter/services/settings"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/services/presend"
	"github.com/newsletter/newsletter/store"
)

// editorData is the issue page's: the editor while the issue may change,
// its progress once it is sending.
type editorData struct {
	Issue  store.Issue // ID 0: not saved yet
	Form   form.Issue
	Topics []topicBox
	// Preview is the mail's HTML as a reader of the first topic gets it
	// (framed as srcdoc in a sandbox), or why there is none.
	Preview, PreviewError string
	Editable              bool
	Progress              *store.IssueProgress
	MaxTest               int
	// TestOffer are the addresses the test-send form offers as boxes
	// (issues.TestGate.Offered).
	TestOffer []string
	// Can are the moves the issue's status allows (issues.Allowed): the
	// page offers those and no others.
	Can map[string]bool
	// Audience is whom a send reaches now (the send's review page asks
	// to type it above the console's threshold); AudienceProblem, why
	// there is no count (the issue's segment is gone): no send is
	// offered.
	Audience        int64
	AudienceProblem string
	// CanUpload: the editor offers an image upload (a saved issue, media
	// configured); Uploaded is the Markdown of the image just uploaded.
	CanUpload bool
	Uploaded  string
	// Segments are the saved segments the audience may be; Segment is
	// the form's and IssueSegment the saved issue's, the send step's
	// (nil: the topics' readers, or a segment since deleted).
	Segments     []store.Segment
	Segment      *store.Segment
	IssueSegment *store.Segment
	// PreviewTopic is the topic the preview shows the mail as ("": none).
	PreviewTopic string
	// HTMLBytes is the previewed mail's HTML part as readers get it, with
	// SizeWarning near or over Gmail's clip (issues.SizeWarning); the
	// saved issue's, for the send step: SendBytes, SendWarning, and
	// Clipped (over issues.ClipBytes: a send needs force).
	HTMLBytes, SendBytes     int
	SizeWarning, SendWarning string
	Clipped                  bool
	ClipBytes                int
	// Checks are the pre-send checks of the previewed content; ChecksBlock,
	// whether one is an error a send refuses unless its checks are
	// ignored (the send step then offers that).
	Checks      []presend.Result
	ChecksBlock bool
	// BodyWarnings are what the writer should hear of the body as it is
	// (issues.BodyWarnings: a template action, which an issue sends as
	// written).
	BodyWarnings []string
	// Report is the issue's report once its sending began (nil before);
	// ReportChart its clicks hour by hour.
	Report      *issues.Report
	ReportChart template.HTML
	ReportAsOf  time.Time
}

// topicBox is one topic's checkbox.
type topicBox struct {
	topics.Topic
	Checked bool
}

func (h *Handler) topicBoxes(checked []string) []topicBox {
	offered := h.cfg.Topics.Current().Offered()
	out := make([]topicBox, len(offered))
	for i, t := range offered {
		out[i] = topicBox{Topic: t}
		for _, c := range checked {
			if c == t.ID {
				out[i].Checked = true
			}
		}
	}
	return out
}

// sameContent tells whether f is is's own content (a send's or a move's
// form) rather than text the writer typed.
func sameContent(f form.Issue, is store.Issue) bool {
	return f.Subject == is.Subject && f.Preheader == is.Preheader && f.Body == is.Body && slices.Equal(f.Topics, is.Topics) &&
		f.Segment == is.Segment && f.ReplyTo == is.ReplyTo && (f.Slug == "" || f.Slug == is.Slug)
}

func formOf(is store.Issue) form.Issue {
	return form.Issue{Subject: is.Subject, Preheader: is.Preheader, Body: is.Body, Topics: is.Topics, Segment: is.Segment, ReplyTo: is.ReplyTo,
		Slug: is.Slug}
}

// previewTopic is the topic f's mail is previewed as: its first; for an
// issue to a segment alone, the topics file's first (each of its
// readers gets it as one of their own topics).
func (h *Handler) previewTopic(f form.Issue) string {
	switch {
	case len(f.Topics) > 0:
		return f.Topics[0]
	case f.Segment > 0 && len(h.cfg.Topics.Current().Topics) > 0:
		return h.cfg.Topics.Current().Topics[0].ID
	}
	return ""
}

// preview renders f as the mail a reader of previewTopic gets.
func (h *Handler) preview(ctx context.Context, is store.Issue, f form.Issue) (html, problem string) {
	if h.d.Renderer == nil {
		return "", "No preview here: this process has no mail templates."
	}
	topic := h.previewTopic(f)
	if topic == "" {
		return "", "Choose a topic or a segment to see the mail."
	}
	is.IssueContent = f.Content()
	if len(is.Topics) == 0 {
		is.Topics = []string{topic}
	}
	_, body, err := issues.Preview(ctx, h.d.Renderer, is, topic, "html")
	if err != nil {
		var bad *issues.InputError
		if errors.As(err, &bad) {
			return "", bad.Msg
		}
		return "", "The mail could not be rendered: " + err.Error()
	}
	return string(body), ""
}

// sizes fills in d the size of the HTML part of the previewed content f
// and of the saved issue is (what a send sends), with their warnings.
// A size that cannot be measured is left out: the preview says why.
func (h *Handler) sizes(ctx context.Context, d *editorData, is store.Issue, f form.Issue) {
	d.ClipBytes = issues.ClipBytes
	if h.d.Renderer == nil || d.PreviewError != "" {
		return
	}
	previewed := is
	previewed.IssueContent = f.Content()
	if n, err := h.d.Renderer.HTMLSize(ctx, previewed); err == nil {
		d.HTMLBytes, d.SizeWarning = n, issues.SizeWarning(n)
	}
	if is.ID == 0 || !d.Can["send"] {
		return
	}
	if n, err := h.d.Renderer.HTMLSize(ctx, is); err == nil {
		d.SendBytes, d.SendWarning, d.Clipped = n, issues.SizeWarning(n), n > issues.ClipBytes
	}
}

// editor renders the issue page for is with the form f (the saved
// content, or what was just posted), with code and a problem to show.
func (h *Handler) editor(w http.ResponseWriter, r *http.Request, code int, is store.Issue, f form.Issue, problem string) {
	h.editorPage(w, r, code, is, f, problem, "")
}

// editorPage is editor, saying the image just uploaded (its Markdown,
// added to the form's body; "": none).
func (h *Handler) editorPage(w http.ResponseWriter, r *http.Request, code int, is store.Issue, f form.Issue, problem, uploaded string) {
	d := editorData{Issue: is, Form: f, Topics: h.topicBoxes(f.Topics), Editable: is.ID == 0 || store.Editable(is.Status),
		MaxTest: issues.MaxTestEmails, Can: issues.Allowed(is), PreviewTopic: h.previewTopic(f),
		TestOffer: h.d.TestGate.Offered(principalOf(r).Name, h.d.Settings.Current(r.Context()).TestRecipients),
		CanUpload: h.d.Media != nil && is.ID != 0, Uploaded: uploaded}
	segs, err := h.d.Store.ListSegments(r.Context())
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	d.Segments = segs
	for i := range segs {
		if segs[i].ID == f.Segment {
			d.Segment = &segs[i]
		}
		if segs[i].ID == is.Segment {
			d.IssueSegment = &segs[i]
		}
	}
	if is.ID != 0 && d.Can["send"] {
		n, err := h.issues.Audience(r.Context(), is)
		var bad *issues.InputError
		switch {
		case errors.As(err, &bad):
			d.AudienceProblem = bad.Msg
		case err != nil:
			h.storeAway(w, r, err)
			return
		default:
			d.Audience = n
		}
	}
	d.Preview, d.PreviewError = h.preview(r.Context(), is, f)
	d.BodyWarnings = issues.BodyWarnings(f.Body)
	h.sizes(r.Context(), &d, is, f)
	h.previewChecks(r.Context(), &d, is, f)
	refresh := 0
	if is.ID != 0 && is.Status != store.IssueDraft {
		p, err := h.d.Store.IssueProgress(r.Context(), is.ID)
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		d.Progress = &p
		if is.Status == store.IssueSending {
			refresh = 5
		}
		if issues.HasReport(is) || p.Sent > 0 {
			rep, err := issues.BuildReport(r.Context(), h.d.Store, h.d.Engagement, is)
			if err != nil {
				h.storeAway(w, r, err)
				return
			}
			d.Report, d.ReportChart, d.ReportAsOf = &rep, reportChart(rep), h.d.Now()
		}
	}
	title := "New issue"
	if is.ID != 0 {
		title = is.Subject
	}
	h.render(w, r, code, "issue", page{Title: title, Section: "issues", Error: problem, Refresh: refresh, Data: d})
}

// issueFailed answers an issue's check or store error: the editor again
// with the message for the writer's mistakes, a page for the rest.
func (h *Handler) issueFailed(w http.ResponseWriter, r *http.Request, is store.Issue, f form.Issue, err error) {
	var bad *issues.InputError
	var state *store.StateError
	var changed *issues.AudienceChangedError
	var rate *issues.TestRateError
	var clipped *issues.ClippedError
	var checks *issues.ChecksError
	switch {
	case errors.As(err, &bad):
		h.editor(w, r, http.StatusBadRequest, is, f, bad.Msg)
	case errors.Is(err, store.ErrSlugTaken):
		h.editor(w, r, http.StatusConflict, is, f, "slug: another issue has the slug "+strconv.Quote(f.Slug)+"; choose another. Nothing was saved.")
	case errors.Is(err, issues.ErrTooLarge), errors.Is(err, form.ErrTooLarge):
		h.editor(w, r, http.StatusRequestEntityTooLarge, is, f, err.Error())
	case errors.Is(err, store.ErrNoIssue):
		h.notFound(w, r, "issue")
	case errors.As(err, &state):
		h.errorPage(w, r, http.StatusConflict, "Not now", "The issue is "+state.Status+": that is not allowed in this status; nothing was changed.")
	case errors.Is(err, store.ErrIssueStale):
		// The writer's text stays in the form, over the issue as it is
		// now, so nothing typed is lost.
		cur, rerr := h.d.Store.Issue(r.Context(), is.ID)
		if rerr != nil {
			h.storeAway(w, r, rerr)
			return
		}
		if sameContent(f, is) {
			// A send or a move, not a save: there is no text of the
			// writer's to keep, and the page's would undo the change.
			h.editor(w, r, http.StatusConflict, cur, formOf(cur), "The issue changed since you opened it; nothing was done. Here it is as it is now: review it and try again.")
			return
		}
		h.editor(w, r, http.StatusConflict, cur, f, "The issue changed since you opened it; nothing was saved. Your text is below: compare it with the saved issue and save again.")
	case errors.As(err, &changed), errors.As(err, &clipped), errors.As(err, &checks), errors.Is(err, issues.ErrNoReaders), errors.Is(err, settings.ErrNoPostalAddress):
		h.editor(w, r, http.StatusConflict, is, f, err.Error()+". Nothing was sent.")
	case errors.Is(err, issues.ErrTestRecipient):
		h.editor(w, r, http.StatusForbidden, is, f, err.Error()+". Nothing was sent.")
	case errors.As(err, &rate):
		h.editor(w, r, http.StatusTooManyRequests, is, f, err.Error())
	default:
		h.storeAway(w, r, err)
	}
}

// issueOf loads the issue of the route's {id}; it answers a bad or
// unknown one itself.
func (h *Handler) issueOf(w http.ResponseWriter, r *http.Request) (store.Issue, bool) {
	id, ok := pathID(r, "id")
	if !ok {
		h.notFound(w, r, "issue")
		return store.Issue{}, false
	}
	is, err := h.d.Store.Issue(r.Context(), id)
	if errors.Is(err, store.ErrNoIssue) {
		h.notFound(w, r, "issue")
		return is, false
	}
	if err != nil {
		h.storeAway(w, r, err)
		return is, false
	}
	return is, true
}

// checkSegment refuses an issue form whose audience is a segment that is
// not one: none picked, or one deleted since the page was opened (the
// API answers a segment it does not know the same way).
func (h *Handler) checkSegment(ctx context.Context, f form.Issue) error {
	switch {
	case f.Segment == form.NoSegment:
		return &issues.InputError{Msg: "segment: choose one of the saved segments, or send to the ticked topics"}
	case f.Segment <= 0:
		return nil
	}
	_, err := h.d.Store.GetSegment(ctx, strconv.FormatInt(f.Segment, 10))
	if errors.Is(err, store.ErrNoSegment) {
		return &issues.InputError{Msg: "segment: segment " + strconv.FormatInt(f.Segment, 10) + " no longer exists; choose another"}
	}
	return err
}
