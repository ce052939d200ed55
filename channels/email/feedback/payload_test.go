package feedback

import (
	"errors"
	"testing"
)

// TestFromReportBelievesOnlyTags: a report names its subscriber only by a
// tag this service made, from the address it was sent to or from the
// headers it quotes; its stated recipient is never used.
func TestFromReportBelievesOnlyTags(t *testing.T) {
	tg := NewTagger([]byte("0123456789abcdef"))
	other := NewTagger([]byte("another secret!!"))
	ann, bob := tg.Tag(7, "digest"), tg.Tag(8, "getting-started")
	rep := func(tags ...string) Report {
		return Report{Type: "hard", Recipient: "victim@example.org", Tags: tags, ID: "smtp-1"}
	}
	for _, c := range []struct {
		name     string
		envelope []string
		rep      Report
		wantID   int64
		wantKind string
		wantErr  error
	}{
		{"no tag anywhere", []string{""}, rep(), 0, "", ErrNoTag},
		{"a tag of another key", []string{other.Tag(7, "digest")}, rep(), 0, "", ErrTagForged},
		{"a guessed MAC in the quoted headers", nil, rep("7-d-000000000000"), 0, "", ErrTagForged},
		{"the envelope's tag", []string{ann}, rep(), 7, "digest", nil},
		{"the quoted Return-Path's tag", []string{""}, rep(bob), 8, KindStep, nil},
		{"a rewritten Message-ID beside a good tag", []string{ann}, rep(ann, "relay123"), 7, "digest", nil},
		{"tags of two mails", []string{ann}, rep(bob), 0, "", ErrTagsDisagree},
		{"tags of two mails in the envelope", []string{ann, bob}, rep(), 0, "", ErrTagsDisagree},
	} {
		p, err := FromReport(c.rep, c.envelope, tg)
		if !errors.Is(err, c.wantErr) || (err != nil && !errors.Is(err, ErrUnverified)) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.wantErr)
			continue
		}
		if p.SubscriberID != c.wantID || p.Kind != c.wantKind || p.Email != "" {
			t.Errorf("%s: %+v, want subscriber %d (%s) and no address", c.name, p, c.wantID, c.wantKind)
		}
		if err == nil && (p.Type != "hard" || p.Source != "smtp" || p.ID != "smtp-1") {
			t.Errorf("%s: %+v", c.name, p)
		}
	}
}

// TestFromReportNamesTheIssue: a report about an issue's mail names the
// issue, from whichever of its tags carries it.
func TestFromReportNamesTheIssue(t *testing.T) {
	tg := NewTagger([]byte("0123456789abcdef"))
	rep := Report{Type: "complaint", Tags: []string{tg.IssueTag(7, 42)}, ID: "smtp-2"}
	for _, envelope := range [][]string{nil, {tg.Tag(7, "issue")}} {
		p, err := FromReport(rep, envelope, tg)
		if err != nil || p.SubscriberID != 7 || p.Kind != "issue" || p.IssueID != 42 {
			t.Fatalf("envelope %q: %+v %v", envelope, p, err)
		}
	}
}
