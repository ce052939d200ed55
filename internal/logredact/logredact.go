// Package logredact keeps addresses out of the logs. Every message and
// attribute passes through a Redactor's Handler, which writes an address
// as its domain and a keyed hash of the whole address
// ("example.org#3f9a0c1e5b7d2a64"): enough to follow one person's mail
// through the log lines, nothing that names them. The hash is an
// HMAC-SHA256 under a key derived from the service's secret, so nobody
// who reads the logs can test a guessed address against it, and no part
// of the local part is ever shown. Task IDs ("welcome:ann@example.com"),
// store errors and asynq's own lines are covered alike, without each log
// call having to remember.
//
// Names cannot be recognised in free text: no log call may print one, and
// no error that reaches a log may quote one (see the mailer's To header).
package logredact

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"unicode"
	"unicode/utf8"
)

// HashBytes is how many bytes of the HMAC a pseudonym shows (16 hex
// digits): no collision in any list this service will hold.
const HashBytes = 8

// Redactor hides addresses with one key.
type Redactor struct {
	key []byte
}

// New returns a Redactor keyed from the service's secret
// (NEWSLETTER_SECRET). The same secret gives the same pseudonyms across
// restarts and processes.
func New(secret []byte) *Redactor {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("newsletter log pseudonym key"))
	return &Redactor{key: m.Sum(nil)}
}

// Hash is the keyed hash of a whole address (case-insensitive), as hex:
// what the logs show of it, and what any other record that must tell
// people apart without naming them (an audit log) can store.
func (r *Redactor) Hash(address string) string {
	m := hmac.New(sha256.New, r.key)
	m.Write([]byte(strings.ToLower(address)))
	return hex.EncodeToString(m.Sum(nil)[:HashBytes])
}

// Pseudonym is what an address becomes in the logs: its domain and Hash.
func (r *Redactor) Pseudonym(address string) string {
	domain := strings.ToLower(address[strings.LastIndexByte(address, '@')+1:])
	return domain + "#" + r.Hash(address)
}

// Redact replaces every address in s with its Pseudonym.
//
// An address is found from its @: the domain is the letters, digits, dots
// and hyphens after it; the local part is the characters an unquoted
// local part may hold (RFC 5322 atext and dots, among them = ' + / and
// the like) before it. A quoted local part (one that ends in a quote
// right before the @) may hold anything but a space, an @ too: then the
// whole run of non-space characters up to its domain is taken. Whatever
// text around an address is taken into it is hidden too: hiding too much
// is harmless.
func (r *Redactor) Redact(s string) string {
	if strings.IndexByte(s, '@') < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && isSpace(s[j]) {
			j++
		}
		k := j
		for k < len(s) && !isSpace(s[k]) {
			k++
		}
		b.WriteString(s[i:j])
		r.redactRun(&b, s[j:k])
		i = k
	}
	return b.String()
}

// redactRun writes run, a stretch of s without spaces, with its addresses
// replaced.
func (r *Redactor) redactRun(b *strings.Builder, run string) {
	done := 0 // run[:done] is written
	if q := strings.LastIndex(run, `"@`); q >= 0 {
		if end := domainEnd(run, q+2); end > q+2 {
			b.WriteString(r.Pseudonym(run[:end]))
			done = end
		}
	}
	for {
		next := strings.IndexByte(run[done:], '@')
		if next < 0 {
			break
		}
		at := done + next
		start := at
		for start > done && isAtext(run[start-1]) {
			start--
		}
		end := domainEnd(run, at+1)
		if start == at || end == at+1 {
			// No local part or no domain: not an address.
			b.WriteString(run[done : at+1])
			done = at + 1
			continue
		}
		b.WriteString(run[done:start])
		b.WriteString(r.Pseudonym(run[start:end]))
		done = end
	}
	b.WriteString(run[done:])
}

// domainEnd is the end of the domain that starts at i: letters (an
// internationalised domain before its conversion too), digits, dots and
// hyphens, without a dot or hyphen at its end (the end of a sentence).
func domainEnd(s string, i int) int {
	end := i
	for end < len(s) {
		c, size := utf8.DecodeRuneInString(s[end:])
		if c != '.' && c != '-' && !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			break
		}
		end += size
	}
	for end > i && (s[end-1] == '.' || s[end-1] == '-') {
		end--
	}
	return end
}

func isSpace(c byte) bool { return c <= ' ' || c == 0x7f }

// isAtext tells the characters of an unquoted local part (RFC 5322 atext,
// and the dots between atoms). Bytes of UTF-8 count too: a local part is
// ASCII once checked, but raw input may not be.
func isAtext(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c >= 0x80:
		return true
	}
	return strings.IndexByte("!#$%&'*+-/=?^_`{|}~.", c) >= 0
}

// Handler wraps h: every message and attribute it gets is redacted first.
func (r *Redactor) Handler(h slog.Handler) slog.Handler { return handler{h, r} }

type handler struct {
	next slog.Handler
	r    *Redactor
}

func (h handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.Redact(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = h.attr(a)
	}
	return handler{h.next.WithAttrs(red), h.r}
}

func (h handler) WithGroup(name string) slog.Handler { return handler{h.next.WithGroup(name), h.r} }

func (h handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.Redact(v.String()))
	case slog.KindGroup:
		group := v.Group()
		red := make([]any, len(group))
		for i, g := range group {
			red[i] = h.attr(g)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		// An error, a Stringer, a slice of task IDs: as the text
		// handler would print it, redacted when it holds an @.
		var s string
		switch x := v.Any().(type) {
		case error:
			s = x.Error()
		case fmt.Stringer:
			s = x.String()
		default:
			s = fmt.Sprint(x)
		}
		if strings.IndexByte(s, '@') >= 0 {
			return slog.String(a.Key, h.r.Redact(s))
		}
		if _, ok := v.Any().(error); ok {
			return slog.String(a.Key, s)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// MaxClientBytes is the most of one client-chosen value (a path, a
// header, a field of a webhook's body, an error quoting one) that a log
// line carries: a client cannot fill the logs with its own text.
const MaxClientBytes = 200

// Clip is a client-chosen value as a log line may carry it: at most
// MaxClientBytes of it (cut at a character's start), and how many bytes
// were left out ("…(+N bytes)"), never the whole of a long one. Every
// log call with a value a request chose passes it through Clip.
func Clip(s string) string {
	if len(s) <= MaxClientBytes {
		return s
	}
	cut := MaxClientBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("…(+%d bytes)", len(s)-cut)
}
