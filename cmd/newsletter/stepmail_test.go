package main

import (
	"context"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/worker"
)

// TestStepPreviewAndTestSend: a sequence step's preview is its mail as
// the worker renders it; its test send goes to each address, subject
// marked [Test], its unsubscribe and preferences links inert; a step
// the renderer does not know is an error, nothing sent.
func TestStepPreviewAndTestSend(t *testing.T) {
	render, err := mailer.NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	sent := &sentMail{}
	x := &issueMail{render: render, mail: sent,
		links: worker.Links{BaseURL: "https://news.example.com", Signer: token.NewSigner([]byte("0123456789abcdef"), 0), Topics: topics.Default(0)}}
	ctx := context.Background()
	html, err := x.PreviewStep(ctx, mailer.KindWelcome, topics.Digest)
	if err != nil || !strings.Contains(string(html), "https://news.example.com/preferences?token=") {
		t.Fatalf("preview: %v\n%s", err, html)
	}
	if err := x.SendStepTest(ctx, mailer.KindWelcome, topics.Digest, []string{"me@example.com", "you@example.com"}); err != nil {
		t.Fatal(err)
	}
	if len(sent.msgs) != 2 {
		t.Fatalf("%d mails, want 2", len(sent.msgs))
	}
	for _, m := range sent.msgs {
		if !strings.HasPrefix(m.Subject, "[Test] ") || !strings.Contains(m.Text, "token="+api.InertToken) {
			t.Fatalf("a step's test mail to %s: subject %q, text:\n%s", m.To, m.Subject, m.Text)
		}
	}
	if err := x.SendStepTest(ctx, "no-such-step", topics.Digest, []string{"me@example.com"}); err == nil || len(sent.msgs) != 2 {
		t.Fatalf("an unknown step: %v, %d mails", err, len(sent.msgs))
	}
}
