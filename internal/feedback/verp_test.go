package feedback

import "testing"

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
	if tg.Tag(0, "digest") != "" || tg.Tag(5, "nope") != "" {
		t.Fatal("tag for an unknown id or kind")
	}
}
