package main

import (
	"context"
	"sync"
	"testing"

	"github.com/newsletter/newsletter/internal/feedback"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks/worker"
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
