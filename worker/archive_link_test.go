package worker

import (
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
)

func TestIssueMailLinksToItsArchivePageWhenPublic(t *testing.T) {
	set, err := topics.Parse([]byte("topics:\n- {id: digest, name: D}\n- {id: updates, name: U}\n- {id: team, name: T, archive: false}\n"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	l := Links{BaseURL: "https://news.example.com", Signer: token.NewSigner([]byte("0123456789abcdef"), 0), Topics: set}
	r, err := mailer.NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	body, err := mailer.RenderMarkdown("Hello **readers**")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		topics []string
		want   string
	}{
		{[]string{"digest"}, "https://news.example.com/archive/march-letter"},
		{[]string{"digest", "updates"}, "https://news.example.com/archive/march-letter"},
		{[]string{"digest", "team"}, ""}, // one private topic keeps it out of the archive
	} {
		is := store.Issue{ID: 1, Slug: "march-letter", IssueContent: store.IssueContent{Subject: "March", Body: "Hello", Topics: c.topics}}
		d := l.To(IssueData(l, is, c.topics[0], body), store.Subscriber{ID: 7, Email: "a@example.com"}, c.topics[0])
		if d.ArchiveURL != c.want {
			t.Fatalf("%v: archive URL %q, want %q", c.topics, d.ArchiveURL, c.want)
		}
		msg, err := r.Render(mailer.KindIssue, d)
		if err != nil {
			t.Fatal(err)
		}
		inHTML := strings.Contains(msg.HTML, `<a href="https://news.example.com/archive/march-letter"`) && strings.Contains(msg.HTML, "View in the browser")
		inText := strings.Contains(msg.Text, "View in the browser: https://news.example.com/archive/march-letter\n")
		if want := c.want != ""; inHTML != want || inText != want {
			t.Fatalf("%v: link in html %v, in text %v, want %v\n%s\n%s", c.topics, inHTML, inText, want, msg.HTML, msg.Text)
		}
	}
}
