package feedback

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/mailer"
)

func TestTagRoundTripAndForgery(t *testing.T) {
	tg := NewTagger([]byte("0123456789abcdef"))
	tag := tg.Tag(123456, "digest")
	id, kind, ok := tg.Parse(tag)
	if !ok || id != 123456 || kind != "digest" {
		t.Fatalf("parse %q: %d %q %v", tag, id, kind, ok)
	}
	// The mailer's envelope sender for it (mailer.returnPath).
	rp := "bounces+" + tag + "@b.example.com"
	if TagOfAddress("<"+rp+">") != tag {
		t.Fatalf("tag of return path %q", rp)
	}
	if got := TagOfMessageID("<0a1b2c." + tag + "@news.example.com>"); got != tag {
		t.Fatalf("message id tag %q", got)
	}
	other := NewTagger([]byte("another secret!!"))
	forged := []string{
		other.Tag(123456, "digest"),   // another key
		"2n9c-d-000000000000",         // a guessed MAC
		tag[:len(tag)-1] + "0",        // one digit changed
		"2n9c-x-" + tag[len(tag)-12:], // unknown kind
		"", "junk", "a-b", "a-b-c-d",
	}
	for _, f := range forged {
		if _, _, ok := tg.Parse(f); ok && f != tag {
			t.Fatalf("forged tag %q accepted", f)
		}
	}
	if TagOfAddress("bounces@b.example.com") != "" || TagOfMessageID("abc@example.com") != "" {
		t.Fatal("a tag found where there is none")
	}
	if tg.Tag(0, "digest") != "" || tg.Tag(5, "") != "" {
		t.Fatal("tag without an id or a kind")
	}
}

// TestEveryKindIsTagged: every kind of mail the service sends, each step
// of the built-in onboarding sequence and a step an operator names in the
// topics file, carries a tag that reads back as its subscriber; the kinds
// with a letter of their own read back as themselves (a digest's bounce
// counts against the digest run), the steps as KindStep. The mailer puts
// the tag in the envelope sender and the Message-ID (verp.go's readers).
func TestEveryKindIsTagged(t *testing.T) {
	tg := NewTagger([]byte("0123456789abcdef"))
	// The steps whose templates are built in (mailer/templates), and one
	// whose template only an operator's folder has.
	kinds := append(mailer.Kinds(), "getting-started", "best-of", "a-step-with-a-long-name-chosen-by-the-operator")
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			const id = 1 << 40 // an id far beyond any list's size
			tag := tg.Tag(id, kind)
			if tag == "" {
				t.Fatalf("%s mail gets no tag", kind)
			}
			want := kind
			if !slices.Contains(mailer.Kinds(), kind) {
				want = KindStep
			}
			if got, gotKind, ok := tg.Parse(tag); !ok || got != id || gotKind != want {
				t.Fatalf("tag %q reads as %d %q %v, want %d %q", tag, got, gotKind, ok, id, want)
			}
			rp := "bounces+" + tag + "@b.example.com"
			if at := strings.IndexByte(rp, '@'); at > 64 {
				t.Fatalf("return path %q: local part longer than 64", rp)
			}
			if TagOfAddress(rp) != tag || TagOfMessageID("<0a1b2c."+tag+"@news.example.com>") != tag {
				t.Fatalf("tag %q not read back from the return path or Message-ID", tag)
			}
		})
	}
}

// TestIssueTagNamesTheIssue: an issue's mail names the issue in its tag,
// so a report counts against it; the MAC covers the issue (a tag moved to
// another issue does not verify), and a tag without it (mail sent before
// tags named issues) still reads as an issue's.
func TestIssueTagNamesTheIssue(t *testing.T) {
	tg := NewTagger([]byte("0123456789abcdef"))
	const sub, issue = 1 << 30, 1 << 20
	tag := tg.IssueTag(sub, issue)
	tr, ok := tg.Trace(tag)
	if !ok || tr.Subscriber != sub || tr.Kind != "issue" || tr.Issue != issue {
		t.Fatalf("trace %q: %+v %v", tag, tr, ok)
	}
	if id, kind, ok := tg.Parse(tag); !ok || id != sub || kind != "issue" {
		t.Fatalf("parse %q: %d %q %v", tag, id, kind, ok)
	}
	if at := strings.IndexByte("bounces+"+tag+"@b.example.com", '@'); at > 64 {
		t.Fatalf("return path of %q: local part longer than 64", tag)
	}
	parts := strings.Split(tag, "-")
	moved := parts[0] + "-i" + strconv.FormatInt(issue+1, 36) + "-" + parts[2]
	for _, bad := range []string{moved, parts[0] + "-i-" + parts[2], parts[0] + "-i!-" + parts[2], parts[0] + "-izz!-" + parts[2]} {
		if tr, ok := tg.Trace(bad); ok {
			t.Fatalf("tag %q accepted as %+v", bad, tr)
		}
	}
	old := tg.Tag(sub, "issue")
	if tr, ok := tg.Trace(old); !ok || tr.Kind != "issue" || tr.Issue != 0 || tr.Subscriber != sub {
		t.Fatalf("an issue tag without the issue: %+v %v", tr, ok)
	}
	if tg.IssueTag(sub, 0) != "" || tg.IssueTag(0, issue) != "" {
		t.Fatal("a tag without a subscriber or an issue")
	}
}

// TestTestTagIsOursAndChangesNothing: a test send's tag is recognised as
// ours (not a forgery), names no subscriber, and a report quoting it is
// ignored by the bounce intake (ErrTestMail) and by the provider
// webhooks (no address, no issue).
func TestTestTagIsOursAndChangesNothing(t *testing.T) {
	tg := NewTagger([]byte("0123456789abcdef"))
	tag := tg.TestTag(42)
	tr, ok := tg.Trace(tag)
	if !ok || tr.Kind != KindTest || tr.Issue != 42 || tr.Subscriber != 0 {
		t.Fatalf("trace %q: %+v %v", tag, tr, ok)
	}
	if _, ok := NewTagger([]byte("another secret!!")).Trace(tag); ok {
		t.Fatal("another key verified a test tag")
	}
	rep := Report{Type: "hard", Recipient: "tester@example.com"}
	if _, err := FromReport(rep, []string{tag}, tg); !errors.Is(err, ErrTestMail) {
		t.Fatalf("a bounce of a test send: %v, want ErrTestMail", err)
	}
	p := payload("ses", "x", "tester@example.com", "hard", "", "<0a1b2c."+tag+"@news.example.com>", tg)
	if p.Kind != KindTest || p.Email != "" || p.SubscriberID != 0 || p.IssueID != 0 {
		t.Fatalf("a provider's report of a test send: %+v, want kind test and no address", p)
	}
}
