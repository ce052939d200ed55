package mailer

import (
	"strings"
	"testing"
)

// TestReaderFilledIntoCountedLinks: an issue whose body carries
// ReaderMark (its links rewritten for the counted redirect) gets each
// reader's own part in their mail, prepared or rendered whole alike, and
// the mark is never left in a mail.
func TestReaderFilledIntoCountedLinks(t *testing.T) {
	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	shared := Data{Subject: "Issue", IssueHTML: `<p><a href="https://news.example.com/r/AAAA.` + ReaderMark + `">x</a></p>`,
		IssueText: "x [1]\n\n[1]: https://news.example.com/r/AAAA." + ReaderMark + "\n"}
	p, err := r.Prepare(KindIssue, shared)
	if err != nil {
		t.Fatal(err)
	}
	for _, reader := range []string{"rA-1_x", "rB-2_y", "rC"} {
		d := Data{Email: reader + "@example.com", UnsubscribeURL: "https://news.example.com/unsubscribe?token=t", Reader: reader}
		got, err := p.Render(d)
		if err != nil {
			t.Fatal(err)
		}
		want, err := r.Render(KindIssue, withPersonal(shared, personalValues(d)))
		if err != nil {
			t.Fatal(err)
		}
		if public(got) != *want {
			t.Fatalf("prepared\n%+v\nfull\n%+v", got, want)
		}
		for _, part := range []string{got.HTML, got.Text} {
			if !strings.Contains(part, "/r/AAAA."+reader) || strings.Contains(part, ReaderMark) {
				t.Fatalf("reader %s's mail:\n%s", reader, part)
			}
		}
	}
	if fast, _, _ := p.Counts(); fast == 0 {
		t.Error("no mail was filled in: the reader's part turned the fast path off")
	}
}
