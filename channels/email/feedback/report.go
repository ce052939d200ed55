package feedback

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/textproto"
	"strings"
)

// Report is one event read from a report mail: a recipient's failed
// delivery (RFC 3464) or a complaint (RFC 5965).
type Report struct {
	// Type is "hard", "soft" or "complaint".
	Type string
	// Recipient is the address the report is about (Final-Recipient,
	// Original-Rcpt-To, or the original's To), as written there.
	Recipient string
	// Tags are the VERP tags the report quotes: the original's envelope
	// sender (its Return-Path, or an abuse report's Original-Mail-From)
	// and its Message-ID, in that order; none when it quotes none. They are
	// unverified text: FromReport checks them, with the tag of the
	// address the report was sent to.
	Tags []string
	// Status is the DSN status code (5.1.1); Reason the diagnostic or the
	// feedback type.
	Status, Reason string
	// ID names the report: the same mail delivered twice gives the same
	// ids.
	ID string
}

// ErrNotAReport means the mail is no delivery-status or abuse report (an
// auto-reply, a person writing to the bounce address): nothing to apply.
var ErrNotAReport = errors.New("not a delivery-status or abuse report")

// maxReportParts bounds the parts read from one report: a real one has
// three.
const maxReportParts = 10

// MaxRecipientBlocks bounds the recipient blocks read from one
// delivery-status report; the rest are not read. Each of our mails has one
// recipient, so a genuine report about it has one block (a few when a
// forwarder expanded the address); hundreds are a forgery's way to make
// work.
const MaxRecipientBlocks = 5

// ParseReport reads a report mail. Delivered, relayed, expanded and delayed
// recipients are no bounce and give no Report; a report with nothing to
// apply gives none and no error.
func ParseReport(r io.Reader) ([]Report, error) {
	msg, err := mail.ReadMessage(bufio.NewReader(r))
	if err != nil {
		return nil, fmt.Errorf("%w: unreadable mail: %v", ErrNotAReport, err)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/report" || params["boundary"] == "" {
		return nil, ErrNotAReport
	}
	kind := strings.ToLower(params["report-type"])
	var status []textproto.MIMEHeader // per-message block, then one per recipient
	var original textproto.MIMEHeader
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for i := 0; ; i++ {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("report part %d: %w", i+1, err)
		}
		if i >= maxReportParts {
			return nil, fmt.Errorf("report has more than %d parts", maxReportParts)
		}
		pt, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		switch pt {
		case "message/delivery-status", "message/global-delivery-status", "message/feedback-report":
			// The per-message block, then the recipients'.
			if status, err = readFieldBlocks(part, 1+MaxRecipientBlocks); err != nil {
				return nil, fmt.Errorf("report fields: %w", err)
			}
		case "message/rfc822", "text/rfc822-headers", "message/global", "message/global-headers":
			// Only the original's header matters; its body may be large.
			h, err := textproto.NewReader(bufio.NewReader(io.LimitReader(part, 64<<10))).ReadMIMEHeader()
			if err == nil || len(h) > 0 {
				original = h
			}
		}
	}
	if len(status) == 0 {
		return nil, fmt.Errorf("%w: no status fields", ErrNotAReport)
	}
	seed := msg.Header.Get("Message-Id")
	if seed == "" {
		seed = fmt.Sprint(status)
	}
	var tags []string
	if original != nil {
		tags = appendTag(tags, TagOfAddress(original.Get("Return-Path")))
		tags = appendTag(tags, TagOfMessageID(original.Get("Message-Id")))
	}
	switch kind {
	case "delivery-status":
		return deliveryStatus(status, tags, seed), nil
	case "feedback-report":
		return abuse(status[0], original, tags, seed), nil
	}
	return nil, fmt.Errorf("%w: report-type %q", ErrNotAReport, kind)
}

func appendTag(tags []string, tag string) []string {
	if tag == "" {
		return tags
	}
	return append(tags, tag)
}

// readFieldBlocks reads up to max header-like blocks separated by blank
// lines.
func readFieldBlocks(r io.Reader, max int) ([]textproto.MIMEHeader, error) {
	tr := textproto.NewReader(bufio.NewReader(io.LimitReader(r, 64<<10)))
	var out []textproto.MIMEHeader
	for len(out) < max {
		h, err := tr.ReadMIMEHeader()
		if len(h) > 0 {
			out = append(out, h)
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func deliveryStatus(blocks []textproto.MIMEHeader, tags []string, seed string) []Report {
	var out []Report
	for _, b := range blocks {
		rcpt := addrField(b.Get("Final-Recipient"))
		if rcpt == "" {
			rcpt = addrField(b.Get("Original-Recipient"))
		}
		action := strings.ToLower(strings.TrimSpace(b.Get("Action")))
		if rcpt == "" || action != "failed" {
			continue // the per-message block, or no bounce (delayed, delivered, relayed)
		}
		st := strings.TrimSpace(b.Get("Status"))
		if i := strings.IndexAny(st, " \t("); i > 0 {
			st = st[:i]
		}
		out = append(out, Report{
			Type: bounceType(st), Recipient: rcpt, Tags: tags, Status: st,
			Reason: strings.TrimSpace(b.Get("Diagnostic-Code")), ID: reportID(seed, rcpt),
		})
	}
	return out
}

// bounceType tells a permanent failure from one that may pass: 5.x.x is
// hard except a full mailbox (x.2.2) and routing or network trouble
// (x.4.x), which often clear; 4.x.x is soft.
func bounceType(status string) string {
	if !strings.HasPrefix(status, "5.") {
		return "soft"
	}
	if strings.HasPrefix(status[1:], ".2.2") || strings.HasPrefix(status[1:], ".4.") {
		return "soft"
	}
	return "hard"
}

func abuse(f textproto.MIMEHeader, original textproto.MIMEHeader, tags []string, seed string) []Report {
	ft := strings.ToLower(strings.TrimSpace(f.Get("Feedback-Type")))
	if ft != "abuse" && ft != "fraud" {
		return nil // virus, other, not-spam: no complaint about us
	}
	// The original's envelope sender as the reporter saw it.
	tags = appendTag(tags, TagOfAddress(f.Get("Original-Mail-From")))
	rcpt := addrField(f.Get("Original-Rcpt-To"))
	if rcpt == "" && original != nil {
		if a, err := mail.ParseAddress(original.Get("To")); err == nil {
			rcpt = a.Address
		}
	}
	return []Report{{Type: "complaint", Recipient: rcpt, Tags: tags, Reason: ft, ID: reportID(seed, rcpt)}}
}

// addrField reads "rfc822; user@example.com" (or a bare address).
func addrField(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.IndexByte(v, ';'); i >= 0 {
		v = strings.TrimSpace(v[i+1:])
	}
	return strings.Trim(v, "<>")
}

func reportID(seed, rcpt string) string {
	h := sha256.Sum256([]byte(seed + "\x00" + strings.ToLower(rcpt)))
	return "smtp-" + hex.EncodeToString(h[:12])
}
