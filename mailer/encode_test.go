package mailer

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// encodeEntries have long lines, non-ASCII text, and characters that
// quoted-printable encodes, so soft line breaks fall everywhere.
var encodeEntries = []Entry{
	{Title: strings.Repeat("Ünïcödé title that goes on and on ", 4), URL: "https://example.com/" + strings.Repeat("long-path/", 12) + "?a=1&b=2",
		Summary: strings.Repeat("A summary with = signs, trailing tabs\t and spaces ", 3)},
	{Title: "Release 2.0 <beta> & more", URL: "https://example.com/2.0?a=1&b=2", Summary: "It is \"out\"."},
	{Title: "Café news", URL: "https://example.com/caf%C3%A9"},
}

// encodeNames are readers' names: none, ASCII, other scripts, and names of
// every length up to beyond a line, so that a value starts and ends at
// every column and the soft line breaks fall before, inside and after it.
func encodeNames() []string {
	names := []string{"", "Ann", "Seán Ó Briain", "Zoë", "李小龍", "Jürgen Müller-Lüdenscheidt",
		strings.Repeat("Jürgen ", 14) + "Ende", strings.Repeat("x", 74), strings.Repeat("é", 40)}
	for n := 1; n <= 80; n += 3 {
		names = append(names, strings.Repeat("ä", n/2)+strings.Repeat("b", n-n/2))
	}
	return names
}

func newEncodeSMTP(t *testing.T) *SMTP {
	t.Helper()
	// Never dialled: encoding needs only the sender's settings.
	s, err := NewSMTP(SMTPOptions{Server: Server{Host: "127.0.0.1", Port: 1, TLS: "none"},
		From: "Nachrichten Café <news@example.com>", ListID: "Newsletter <news.example.com>", BounceAddress: "bounces@b.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// checkEncoded renders and encodes a mail of kind to each reader through a
// Prepared and fails unless the bytes are go-mail's for the full render,
// and unless every filled-in mail was written from its encoded template.
func checkEncoded(t *testing.T, s *SMTP, r *Renderer, kind string, shared Data) {
	t.Helper()
	p, err := r.Prepare(kind, shared)
	if err != nil {
		t.Fatal(err)
	}
	date := time.Date(2026, 12, 7, 9, 0, 0, 0, time.FixedZone("CET", 3600))
	for i, name := range encodeNames() {
		token := fmt.Sprintf("eyJlIjoicmVhZGVy%d-_%s.%s", i, strings.Repeat("A", i%50), strings.Repeat("q", 43))
		d := Data{Email: fmt.Sprintf("reader%d@example.org", i), Name: name,
			ConfirmURL:     "https://news.example.com/confirm?token=" + token,
			UnsubscribeURL: "https://news.example.com/unsubscribe?token=" + token,
			PreferencesURL: "https://news.example.com/preferences?token=" + token}
		if i%4 == 1 {
			d.UnsubscribeURL = "" // a shape without List-Unsubscribe
		}
		// Half of them as the SMTP sender gets them: without their text,
		// which it does not read.
		render := p.Render
		if i%2 == 0 {
			render = func(d Data) (*Message, error) { return p.RenderFor(s, d) }
		}
		msg, err := render(d)
		if err != nil {
			t.Fatal(err)
		}
		msg.ToName, msg.Tag = name, fmt.Sprintf("2n9c-d-%012x", i)
		msg.MessageID, msg.Date = fmt.Sprintf("%032x.%s@example.com", i, msg.Tag), date
		got, _, err := s.encode(msg, nil)
		if err != nil {
			t.Fatal(err)
		}
		full, err := r.Render(kind, withPersonal(shared, personalValues(d)))
		if err != nil {
			t.Fatal(err)
		}
		full.ToName, full.Tag, full.MessageID, full.Date, full.boundary = msg.ToName, msg.Tag, msg.MessageID, msg.Date, msg.boundary
		want, err := s.writeGoMail(full, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s to %q: the encoded mail differs from go-mail's full render at byte %d:\n%s", kind, name, firstDiff(got, want), diffContext(got, want))
		}
	}
	if fast, _, encoded := p.Counts(); fast == 0 || encoded != fast {
		t.Fatalf("%s: %d mails filled in, %d written from the encoded template; want all", kind, fast, encoded)
	}
}

// TestEncodedEqualsFullRender: for every kind of mail, the mail written
// from the batch's encoded template is byte for byte what go-mail writes
// for the full render of the same mail (same Message-ID, date and
// boundary), for readers with non-ASCII names of every length, long lines
// in the shared part, and readers with and without an unsubscribe link.
func TestEncodedEqualsFullRender(t *testing.T) {
	r, err := NewRenderer("", "getting-started", "best-of")
	if err != nil {
		t.Fatal(err)
	}
	s := newEncodeSMTP(t)
	shared := Data{Period: "2026-W49", Entries: encodeEntries, Topic: "Wöchentlicher Überblick", ListID: "Digest <digest.news.example.com>"}
	for _, kind := range append(Kinds(), "getting-started", "best-of") {
		t.Run(kind, func(t *testing.T) { checkEncoded(t, s, r, kind, shared) })
	}
}

// TestEncodedPersonalSubject: an operator's template that prints the
// reader's name in the subject and all over the body, at the start and end
// of lines; the subject is folded and Q-encoded per mail as go-mail does.
func TestEncodedPersonalSubject(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"digest.txt": `{{define "subject"}}{{.Name}}, hier ist was neu ist in {{.Period}}: ` + strings.Repeat("Überschrift ", 6) + `{{end}}` +
			"{{.Name}}\n{{.Name}}{{.Name}} {{.Email}}\n\n{{range .Entries}}{{.Title}} {{$.Name}}\n{{end}}{{.UnsubscribeURL}}{{.PreferencesURL}}",
		"digest.html": `{{define "body"}}<p>{{.Name}}</p>{{range .Entries}}<p>{{.Title}} – {{$.Name}}</p>{{end}}<a href="{{.PreferencesURL}}">{{.Name}}</a>{{end}}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := NewRenderer(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkEncoded(t, newEncodeSMTP(t), r, KindDigest, Data{Period: "2026-W49", Entries: encodeEntries})
}

// A template that puts the name in a URL percent-encodes letters beyond
// ASCII: those readers get a variant of their own, whose first mail shows
// the difference, so none of them is filled in wrongly.
func TestEncodedNameInURL(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "digest.html"), []byte(`{{define "body"}}<a href="https://example.com/?n={{.Name}}">{{.Name}}</a>{{end}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := NewRenderer(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Prepare(KindDigest, Data{Entries: preparedItems})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Ann", "Bob", "Zoë", "Jürgen", "Ann"} {
		d := Data{Email: "a@example.org", Name: name, UnsubscribeURL: "https://x.example/u", PreferencesURL: "https://x.example/p"}
		got, err := p.Render(d)
		if err != nil {
			t.Fatal(err)
		}
		want, err := r.Render(KindDigest, withPersonal(Data{Entries: preparedItems}, personalValues(d)))
		if err != nil {
			t.Fatal(err)
		}
		if public(got) != *want {
			t.Fatalf("%s: the filled-in mail differs from the full render:\n%s\n%s", name, got.HTML, want.HTML)
		}
	}
	if fast, _, _ := p.Counts(); fast != 3 {
		t.Fatalf("%d mails filled in; want the three ASCII ones", fast)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func diffContext(got, want []byte) string {
	i := firstDiff(got, want)
	from := max(0, i-200)
	return fmt.Sprintf("got:  %q\nwant: %q", got[from:min(len(got), i+100)], want[from:min(len(want), i+100)])
}

// TestPreparedSharedByConcurrentBatches: the batches of a digest share
// one Prepared; rendering and encoding from many goroutines at once gives
// each reader the full render's bytes, and each variant is checked once.
func TestPreparedSharedByConcurrentBatches(t *testing.T) {
	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	s := newEncodeSMTP(t)
	shared := Data{Period: "2026-W49", Entries: encodeEntries, Topic: "Weekly digest"}
	p, err := r.Prepare(KindDigest, shared)
	if err != nil {
		t.Fatal(err)
	}
	names := encodeNames()
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			errs <- func() error {
				var buf []byte
				for i := range 30 {
					name := names[(g*30+i)%len(names)]
					d := Data{Email: fmt.Sprintf("r%d-%d@example.org", g, i), Name: name,
						UnsubscribeURL: "https://n.example/u?token=t", PreferencesURL: "https://n.example/p?token=t"}
					msg, err := p.Render(d)
					if err != nil {
						return err
					}
					msg.ToName, msg.MessageID, msg.Date = name, fmt.Sprintf("%d.%d@example.com", g, i), time.Unix(1e9, 0)
					if buf, _, err = s.encode(msg, buf[:0]); err != nil {
						return err
					}
					full, err := r.Render(KindDigest, withPersonal(shared, personalValues(d)))
					if err != nil {
						return err
					}
					full.ToName, full.MessageID, full.Date, full.boundary = msg.ToName, msg.MessageID, msg.Date, msg.boundary
					want, err := s.writeGoMail(full, nil)
					if err != nil {
						return err
					}
					if !bytes.Equal(buf, want) {
						return fmt.Errorf("%s: %s", d.Email, diffContext(buf, want))
					}
				}
				return nil
			}()
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if fast, full, encoded := p.Counts(); fast != 240 || full != 0 || encoded != 240 {
		t.Fatalf("%d filled in, %d rendered whole, %d encoded; want 240, 0, 240", fast, full, encoded)
	}
}

// TestPreparedChangedAfterRender: a caller that changes a prepared mail
// after RenderFor (a test send's subject prefix) sends it whole through
// go-mail, with its text filled in.
func TestPreparedChangedAfterRender(t *testing.T) {
	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	s := newEncodeSMTP(t)
	shared := Data{Period: "2026-W49", Entries: encodeEntries}
	p, err := r.Prepare(KindDigest, shared)
	if err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"", "[Test] "} {
		d := Data{Email: "ann@example.org", Name: "Ann", UnsubscribeURL: "https://n.example/u", PreferencesURL: "https://n.example/p"}
		msg, err := p.RenderFor(s, d)
		if err != nil {
			t.Fatal(err)
		}
		msg.Subject = prefix + msg.Subject
		msg.MessageID, msg.Date, msg.boundary = "x@example.com", time.Unix(1e9, 0), "b0undary"
		got, _, err := s.encode(msg, nil)
		if err != nil {
			t.Fatal(err)
		}
		full, err := r.Render(KindDigest, withPersonal(shared, personalValues(d)))
		if err != nil {
			t.Fatal(err)
		}
		full.Subject = prefix + full.Subject
		full.MessageID, full.Date, full.boundary = msg.MessageID, msg.Date, msg.boundary
		want, err := s.writeGoMail(full, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("subject %q: %s", msg.Subject, diffContext(got, want))
		}
	}
}

// parsedAddress is the To value the way build makes it: toAddress, then
// net/mail's String.
func parsedAddress(name, addr string) (string, error) {
	a, err := toAddress(name, addr)
	if err != nil {
		return "", err
	}
	return a.String(), nil
}

var addressSamples = [][2]string{
	{"", "ann@example.org"}, {"Ann Lee", "ann@example.org"}, {"Reader 12345", "reader0012345@example.org"},
	{"Dr. A. Lee, PhD", "ann+tag@sub.example.org"}, {" Ann  Lee ", "a.b+news@x.example"},
	{"O'Brien (home) <x>", "o'brien@example.org"}, {"=?utf-8?q?Ann?=", "ann@example.org"}, {`Ann "the" Lee`, "ann@example.org"},
	{`back\slash`, "ann@example.org"}, {"Zoë", "zoe@example.org"}, {"Ann", "a..b@example.org"}, {"Ann", ".a@example.org"},
	{"Ann", "a@[127.0.0.1]"}, {"Ann", `"quoted local"@example.org`}, {"tab\there", "ann@example.org"}, {"Ann", "ann@exämple.org"},
}

// TestSimpleAddressIsNetMails: where the To value is made without
// parsing, it is what go-mail's parse and net/mail's String make.
func TestSimpleAddressIsNetMails(t *testing.T) {
	fast := 0
	for _, c := range addressSamples {
		got, ok := simpleAddress(c[0], c[1])
		if !ok {
			continue
		}
		fast++
		want, err := parsedAddress(c[0], c[1])
		if err != nil || got != want {
			t.Errorf("%q <%s>: made %q, parsed %q (%v)", c[0], c[1], got, want, err)
		}
	}
	if fast < 5 {
		t.Fatalf("only %d samples took the fast path", fast)
	}
}

func FuzzSimpleAddress(f *testing.F) {
	for _, c := range addressSamples {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, name, addr string) {
		got, ok := simpleAddress(name, addr)
		if !ok {
			return
		}
		want, err := parsedAddress(name, addr)
		if err != nil || got != want {
			t.Fatalf("%q <%s>: made %q, parsed %q (%v)", name, addr, got, want, err)
		}
	})
}
