package main

import (
	"bytes"
	"context"
	"html"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/services/engage"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/worker"
)

// sentMail records what a test send hands the mailer.
type sentMail struct {
	mu   sync.Mutex
	msgs []*mailer.Message
}

func (s *sentMail) Send(_ context.Context, m *mailer.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, m)
	return nil
}

// TestTestSendCarriesItsOwnTag: a test send's mail is tagged as a test
// of its issue (its envelope sender and Message-ID carry the tag), so a
// bounce of it is known as ours and changes nothing.
func TestTestSendCarriesItsOwnTag(t *testing.T) {
	render, err := mailer.NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	tags := feedback.NewTagger([]byte("0123456789abcdef"))
	sent := &sentMail{}
	x := &issueMail{render: render, mail: sent, tags: tags,
		links: worker.Links{BaseURL: "https://news.example.com", Signer: token.NewSigner([]byte("0123456789abcdef"), 0), Topics: topics.Default(0)}}
	is := store.Issue{ID: 9, Slug: "march", IssueContent: store.IssueContent{Subject: "March", Body: "Hello", Topics: []string{"digest"}}}
	if err := x.SendTest(context.Background(), is, []string{"me@example.com"}); err != nil {
		t.Fatal(err)
	}
	if len(sent.msgs) != 1 {
		t.Fatalf("%d mails, want 1", len(sent.msgs))
	}
	tr, ok := tags.Trace(sent.msgs[0].Tag)
	if !ok || tr.Kind != feedback.KindTest || tr.Issue != 9 {
		t.Fatalf("the test mail's tag %q traces to %+v %v, want a test of issue 9", sent.msgs[0].Tag, tr, ok)
	}
}

// TestTestSendAndPreviewLinksAreTestLinks: a test send's mail (HTML and
// text) and an .eml preview carry the body's links through the counted
// redirect, as a reader's mail does, with test tokens: each leads to
// its target and is never counted (engage.Keys.ParseTest). The size
// guard measures the mail a reader gets, reader tokens and all.
func TestTestSendAndPreviewLinksAreTestLinks(t *testing.T) {
	render, err := mailer.NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("0123456789abcdef")
	keys := engage.NewKeys(secret)
	sent := &sentMail{}
	composer, err := mailer.NewComposer(mailer.ComposeOptions{From: "News <news@example.com>"})
	if err != nil {
		t.Fatal(err)
	}
	x := &issueMail{render: render, mail: sent, tags: feedback.NewTagger(secret), mime: composer,
		links: worker.Links{BaseURL: "https://news.example.com", Signer: token.NewSigner(secret, 0), Topics: topics.Default(0), Engagement: keys}}
	is := store.Issue{ID: 9, Slug: "march", IssueContent: store.IssueContent{Subject: "March", Body: "Read [the notes](https://example.org/notes?a=1).", Topics: []string{"digest"}}}
	if err := x.SendTest(context.Background(), is, []string{"me@example.com"}); err != nil {
		t.Fatal(err)
	}
	_, eml, err := x.Preview(context.Background(), is, "digest", "eml")
	if err != nil {
		t.Fatal(err)
	}
	m := sent.msgs[0]
	testLink := regexp.MustCompile(`https://news\.example\.com/r/([A-Za-z0-9_-]+)\?u=([^\s"&<]+)`)
	link := testLink.FindStringSubmatch(m.Text)
	if link == nil || link[2] != url.QueryEscape("https://example.org/notes?a=1") || strings.Contains(m.HTML, `href="https://example.org/notes`) ||
		!strings.Contains(m.HTML, html.EscapeString(link[0])) {
		t.Fatalf("the test mail's link is not a test link:\n%s\n%s", m.HTML, m.Text)
	}
	if _, err := keys.ParseTest(link[1], "https://example.org/notes?a=1", time.Now()); err != nil {
		t.Fatalf("the test mail's token: %v", err)
	}
	raw, err := mail.ReadMessage(bytes.NewReader(eml))
	if err != nil {
		t.Fatal(err)
	}
	if !decodedMatches(t, raw, testLink) {
		t.Fatalf("the .eml preview's link is not a test link:\n%s", eml)
	}
	n, err := x.HTMLSize(context.Background(), is)
	if err != nil || n <= len(m.HTML)-200 {
		t.Fatalf("size %d %v for a mail of about %d bytes", n, err, len(m.HTML))
	}
}

// decodedMatches reports whether any text part of msg, decoded, matches re.
func decodedMatches(t *testing.T, msg *mail.Message, re *regexp.Regexp) bool {
	t.Helper()
	_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := r.NextPart()
		if err != nil {
			return false
		}
		b, err := io.ReadAll(p) // NextPart decodes quoted-printable
		if err != nil {
			t.Fatal(err)
		}
		if re.MatchString(html.UnescapeString(string(b))) {
			return true
		}
	}
}
