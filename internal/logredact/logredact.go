// Package logredact keeps addresses out of the logs. Every message and
// attribute passes through Handler, which writes an address as its domain
// and a short hash ("example.com#1a2b3c4d"): enough to follow one person's
// mail through the log lines, nothing that names them. Task IDs
// ("welcome:ann@example.com"), store errors and asynq's own lines are
// covered alike, without each log call having to remember.
package logredact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"regexp"
	"strings"
)

// An address as it appears in our logs: a local part, an @, a domain with
// a dot. Loose on purpose: hiding too much is harmless.
var addressPattern = regexp.MustCompile(`[^\s"'<>()\[\],;:@=]+@[A-Za-z0-9.-]+\.[A-Za-z0-9-]+`)

// Pseudonym is what an address becomes in the logs.
func Pseudonym(address string) string {
	address = strings.ToLower(address)
	sum := sha256.Sum256([]byte(address))
	domain := address[strings.LastIndexByte(address, '@')+1:]
	return domain + "#" + hex.EncodeToString(sum[:4])
}

// Redact replaces every address in s.
func Redact(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	return addressPattern.ReplaceAllStringFunc(s, Pseudonym)
}

// Handler wraps h.
func Handler(h slog.Handler) slog.Handler { return handler{h} }

type handler struct{ next slog.Handler }

func (h handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, Redact(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = redactAttr(a)
	}
	return handler{h.next.WithAttrs(red)}
}

func (h handler) WithGroup(name string) slog.Handler { return handler{h.next.WithGroup(name)} }

func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, Redact(v.String()))
	case slog.KindGroup:
		group := v.Group()
		red := make([]any, len(group))
		for i, g := range group {
			red[i] = redactAttr(g)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, Redact(err.Error()))
		}
		if s, ok := v.Any().(interface{ String() string }); ok {
			return slog.String(a.Key, Redact(s.String()))
		}
	}
	return a
}
