package main

import (
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/newsletter/newsletter/channels/email/smtptest"
)

// A mail is one message the sink took, as the checker sees it: to whom,
// what kind, and when.
type mail struct {
	to   string
	kind string // confirm, welcome, events, issue:<subject>, other:<subject>
	at   time.Time
	// events are the numbers of the events an events mail bundles ("Event
	// N" in its text): a person gets one such mail per bundle, so a
	// duplicate is an event in two mails, not a second mail.
	events []string
	// composed is the mail's Date header: when the worker composed it,
	// after its last look at the subscription (whole seconds, rounded
	// down). Zero when the header does not parse.
	composed time.Time
}

var (
	confirmLink = regexp.MustCompile(`/confirm\?token=([A-Za-z0-9_.~%=-]+)`)
	prefsLink   = regexp.MustCompile(`/preferences\?token=([A-Za-z0-9_.~%=-]+)`)
	// eventTitle is an event's title as the soak posts it (load.go).
	eventTitle = regexp.MustCompile(`\bEvent (\d+)\b`)
)

func classify(m smtptest.Message, run string) mail {
	to := ""
	if len(m.To) > 0 {
		to = strings.ToLower(m.To[0])
	}
	subject := m.Header.Get("Subject")
	kind := "other:" + subject
	switch {
	case strings.Contains(subject, "confirm your subscription"):
		kind = "confirm"
	case strings.HasPrefix(subject, "Welcome"):
		kind = "welcome"
	case strings.Contains(subject, "new notification"):
		kind = "events"
	case strings.HasPrefix(subject, "Soak "+run+" issue"):
		kind = "issue:" + subject
	}
	composed, err := m.Header.Date()
	if err != nil {
		composed = time.Time{}
	}
	ml := mail{to: to, kind: kind, at: m.At, composed: composed}
	if kind == "events" {
		// Each title is in the text part and the HTML part: once each.
		seen := map[string]bool{}
		for _, sub := range eventTitle.FindAllSubmatch(m.Data, -1) {
			if n := string(sub[1]); !seen[n] {
				seen[n] = true
				ml.events = append(ml.events, n)
			}
		}
	}
	return ml
}

// watch reads the mails that arrived since the last call into the
// ledger's people: the confirmation's token, the preferences token of a
// welcome. It returns the new mails.
func watch(sink *smtptest.Server, seen *int, led *ledger, run string) []mail {
	msgs := sink.Messages()
	var out []mail
	for _, m := range msgs[*seen:] {
		ml := classify(m, run)
		out = append(out, ml)
		if ml.kind != "confirm" && ml.kind != "welcome" {
			continue
		}
		text := m.Text()
		led.mu.Lock()
		p := led.people[ml.to]
		if p != nil && ml.kind == "confirm" && p.confirmToken == "" {
			p.confirmToken = token(confirmLink, text)
		}
		if p != nil && ml.kind == "welcome" && p.prefsToken == "" {
			p.prefsToken = token(prefsLink, text)
		}
		led.mu.Unlock()
	}
	*seen = len(msgs)
	return out
}

func token(re *regexp.Regexp, text string) string {
	m := re.FindStringSubmatch(text)
	if m == nil {
		return ""
	}
	t, err := url.QueryUnescape(m[1])
	if err != nil {
		return m[1]
	}
	return t
}
