package bench

import (
	"net/smtp"
	"testing"
	"time"
)

// TestPlainSinkOffersNoPipelining: through the plain sink's proxy the
// EHLO answer offers neither PIPELINING nor CHUNKING, keeps the rest,
// and a mail goes through to the sink and is counted.
func TestPlainSinkOffersNoPipelining(t *testing.T) {
	s, err := StartPlainSink()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := smtp.Dial(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if err := c.Hello("bench.test"); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{"PIPELINING", "CHUNKING"} {
		if ok, _ := c.Extension(ext); ok {
			t.Errorf("the plain sink offers %s", ext)
		}
	}
	if ok, _ := c.Extension("8BITMIME"); !ok {
		t.Error("the plain sink dropped 8BITMIME, which it should pass through")
	}
	if err := c.Mail("news@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("r@example.org"); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("Subject: x\r\n\r\nbody\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Accepted() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s.Accepted() != 1 {
		t.Fatalf("the sink took %d mails, want 1", s.Accepted())
	}
}
