package console

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
)

// reviewSend is POST /admin/issues/{id}/send/review: the send form's
// first step, which changes nothing. It checks the form (a when must be
// chosen: the console never sends "now" by default), counts the readers
// and shows what the send will do, with one button that posts the same
// fields to /send (the number typed there above the console's
// threshold, agreed by the click below it).
func (h *Handler) reviewSend(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	f, err := form.NewSend(w, r)
	if err != nil {
		h.editor(w, r, form.Status(err), is, formOf(is), err.Error())
		return
	}
	when, err := f.Schedule()
	if err == nil {
		_, err = f.Options()
	}
	if err != nil {
		h.editor(w, r, http.StatusBadRequest, is, formOf(is), err.Error())
		return
	}
	n, err := h.issues.Audience(r.Context(), is)
	var bad *issues.InputError
	switch {
	case errors.As(err, &bad):
		h.editor(w, r, http.StatusBadRequest, is, formOf(is), bad.Msg)
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	d := confirmData{Heading: "Send “" + is.Subject + "”?", Action: "/admin/issues/" + itoa(is.ID) + "/send",
		Lines: sendLines(is, when, n), Back: "/admin/issues/" + itoa(is.ID), Button: sendButton(when, n)}
	d.Fields = []hiddenField{{"when", f.When}, {"at", f.At}, {"local_time", f.LocalTime}}
	if f.Version > 0 {
		d.Fields = append(d.Fields, hiddenField{"version", strconv.Itoa(f.Version)})
	}
	if f.Force {
		d.Fields = append(d.Fields, hiddenField{"force", "on"})
	}
	if f.IgnoreChecks {
		d.Fields = append(d.Fields, hiddenField{"ignore_checks", "on"})
	}
	if n > h.cfg.ConfirmSendAbove {
		d.AskAudience = n
	} else {
		d.Fields = append(d.Fields, hiddenField{"audience", strconv.FormatInt(n, 10)})
	}
	h.render(w, r, http.StatusOK, "confirm", page{Title: "Send " + is.Subject, Section: "issues", Data: d})
}

// sendLines say what a send of is will do: to whom, when, and what can
// still be stopped.
func sendLines(is store.Issue, when issues.When, n int64) []string {
	readers := groupDigits(n) + " reader"
	if n != 1 {
		readers += "s"
	}
	var lines []string
	switch {
	case when.At != "":
		lines = append(lines, "It is scheduled for "+readers+" (counted now) at "+when.At+" UTC. Until then it can be taken back to a draft, rescheduled or cancelled.")
	case when.LocalTime != "":
		lines = append(lines, "It goes to "+readers+", each at "+when.LocalTime+" in their own time zone, from now on over the next day.")
	default:
		lines = append(lines, "It goes to "+readers+" now.")
	}
	if is.Status == store.IssueScheduled {
		lines = append(lines, "This replaces its schedule.")
	}
	return append(lines, "A mail that has gone cannot be called back: pause or cancel stop the rest.")
}

// sendButton is the confirm button's label.
func sendButton(when issues.When, n int64) string {
	if when.At != "" {
		return "Schedule for " + groupDigits(n) + " readers"
	}
	return "Send to " + groupDigits(n) + " readers"
}
