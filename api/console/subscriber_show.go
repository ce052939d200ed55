package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

type subscriberData struct {
	Sub    store.Subscriber
	Topics []topicBox
	// Data is everything held about the person (nil: People is not
	// wired, the record alone).
	Data *store.PersonalData
	// CanRequest: the export and the erase are wired.
	CanRequest bool
	// Defs are the declared custom fields, whose values the page shows
	// and edits.
	Defs []store.FieldDef
	// Channels is what each channel added through the seam keeps of the
	// person (the inbox's messages), as indented JSON by channel.
	Channels map[string]string
}

// channelData reads what the added channels keep of a person: the
// subscribers service's, when Requests is one.
type channelData interface {
	ChannelData(ctx context.Context, id int64, email string) (map[string]any, error)
}

// fieldRow is a declared field and the person's value of it.
type fieldRow struct {
	Def   store.FieldDef
	Value string
}

// FieldRows are the declared fields with the person's values, by name.
func (d subscriberData) FieldRows() []fieldRow {
	out := make([]fieldRow, len(d.Defs))
	for i, def := range d.Defs {
		out[i] = fieldRow{Def: def, Value: d.Sub.Fields[def.Name]}
	}
	return out
}

// MaxTags is the most tags a person has (the edit form says so).
func (subscriberData) MaxTags() int { return store.MaxTagsPerPerson }

// Suppressed tells the template whether to offer the lift.
func (d subscriberData) Suppressed() bool { return d.Sub.Status.Suppressed() }

// Bounces and Complaints split the person's feedback for the page.
func (d subscriberData) Bounces() []store.FeedbackEvent { return d.feedback(false) }

func (d subscriberData) Complaints() []store.FeedbackEvent { return d.feedback(true) }

func (d subscriberData) feedback(complaints bool) []store.FeedbackEvent {
	if d.Data == nil {
		return nil
	}
	var out []store.FeedbackEvent
	for _, f := range d.Data.Feedback {
		if (f.Type == store.Complaint) == complaints {
			out = append(out, f)
		}
	}
	return out
}

// sentLine is one line of the person's mails: what it was, where the
// console shows it ("" for nowhere), when (zero for the shared ones,
// which keep no time per person).
type sentLine struct {
	What, Link string
	At         time.Time
}

// Sent are the person's delivery marks as the page lists them: a
// fan-out mark (channel tasks queued for an event or an issue) says so
// rather than pass for a mail.
func (d subscriberData) Sent() []sentLine {
	if d.Data == nil {
		return nil
	}
	out := make([]sentLine, 0, len(d.Data.Mails))
	for _, m := range d.Data.Mails {
		l := sentLine{What: strings.TrimSpace(m.Kind + " " + m.Key), At: m.At}
		switch m.Kind {
		case "issue":
			l.Link = "/admin/issues/" + m.Key
		case tasks.FanoutMarkKind:
			if id, ok := strings.CutPrefix(m.Key, "issue:"); ok {
				l.What, l.Link = "notifications of issue "+id+" queued (push and other channels)", "/admin/issues/"+id
			} else {
				l.What = "notifications of event " + strings.TrimPrefix(m.Key, "ev:") + " queued"
			}
		}
		out = append(out, l)
	}
	return out
}

// showSubscriber is GET /admin/subscribers/{id}: the person's record,
// topics, consent, mails, bounces and complaints, and the actions.
func (h *Handler) showSubscriber(w http.ResponseWriter, r *http.Request) {
	sub, ok := h.subscriberOf(w, r)
	if !ok {
		return
	}
	h.subscriberPage(w, r, http.StatusOK, sub, "")
}

// subscriberPage renders sub's page with code, saying problem when there
// is one. The title names the person by id: a browser's history keeps
// titles, and an address has no business there.
func (h *Handler) subscriberPage(w http.ResponseWriter, r *http.Request, code int, sub store.Subscriber, problem string) {
	d := subscriberData{Sub: sub, Topics: h.topicBoxes(sub.Topics), CanRequest: h.d.Requests != nil}
	defs, err := h.d.Store.FieldDefs(r.Context())
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	d.Defs = defs
	if h.d.People != nil {
		pd, err := h.d.People.PersonalData(r.Context(), sub.Email)
		if errors.Is(err, store.ErrNotFound) {
			// Erased between the two reads.
			h.notFound(w, r, "subscriber")
			return
		}
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		d.Sub, d.Data = pd.Subscriber, &pd
	}
	if cd, ok := h.d.Requests.(channelData); ok {
		kept, err := cd.ChannelData(r.Context(), d.Sub.ID, d.Sub.Email)
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		for name, v := range kept {
			b, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				h.storeAway(w, r, err)
				return
			}
			if d.Channels == nil {
				d.Channels = map[string]string{}
			}
			d.Channels[name] = string(b)
		}
	}
	h.render(w, r, code, "subscriber", page{Title: "Subscriber " + itoa(sub.ID), Section: "subscribers", Error: problem, Data: d})
}
