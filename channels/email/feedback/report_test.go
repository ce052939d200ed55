package feedback

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

func fixture(t *testing.T, name, tag string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	// The files use LF; a mail on the wire uses CRLF, and both must read.
	return strings.ReplaceAll(string(b), "TAG", tag)
}

func TestParseDSN(t *testing.T) {
	for _, crlf := range []bool{false, true} {
		raw := fixture(t, "dsn.eml", "2n9c-d-0123456789ab")
		if crlf {
			raw = strings.ReplaceAll(raw, "\n", "\r\n")
		}
		reps, err := ParseReport(strings.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if len(reps) != 2 {
			t.Fatalf("want the two failed recipients, not the delayed one: %+v", reps)
		}
		gone, full := reps[0], reps[1]
		if gone.Type != "hard" || gone.Recipient != "gone@example.org" || gone.Status != "5.1.1" || !slices.Equal(gone.Tags, []string{"2n9c-d-0123456789ab", "2n9c-d-0123456789ab"}) || !strings.Contains(gone.Reason, "User unknown") {
			t.Fatalf("user unknown: %+v", gone)
		}
		if full.Type != "soft" || full.Recipient != "full@example.org" {
			t.Fatalf("mailbox full is a soft bounce: %+v", full)
		}
		again, _ := ParseReport(strings.NewReader(raw))
		if again[0].ID != gone.ID || gone.ID == full.ID {
			t.Fatalf("report ids: %q %q %q", gone.ID, again[0].ID, full.ID)
		}
	}
}

func TestParseARF(t *testing.T) {
	reps, err := ParseReport(strings.NewReader(fixture(t, "arf.eml", "2n9c-d-0123456789ab")))
	if err != nil || len(reps) != 1 {
		t.Fatalf("%+v %v", reps, err)
	}
	r := reps[0]
	if r.Type != "complaint" || r.Recipient != "reader@example.org" || !slices.Equal(r.Tags, []string{"2n9c-d-0123456789ab", "2n9c-d-0123456789ab"}) || r.Reason != "abuse" {
		t.Fatalf("complaint: %+v", r)
	}
	notSpam := strings.Replace(fixture(t, "arf.eml", "x"), "Feedback-Type: abuse", "Feedback-Type: virus", 1)
	if reps, err := ParseReport(strings.NewReader(notSpam)); err != nil || len(reps) != 0 {
		t.Fatalf("a virus report is no complaint about us: %+v %v", reps, err)
	}
}

func TestParseMalformedReports(t *testing.T) {
	for name, raw := range map[string]string{
		"plain mail":       "From: a@example.org\r\nSubject: hello\r\n\r\nAre you there?\r\n",
		"no header end":    "garbage without any structure",
		"report, no parts": "Content-Type: multipart/report; report-type=delivery-status; boundary=b\r\n\r\n--b--\r\n",
		"unknown report":   "Content-Type: multipart/report; report-type=disposition-notification; boundary=b\r\n\r\n--b\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: abuse\r\n\r\n--b--\r\n",
		"broken boundary":  "Content-Type: multipart/report; report-type=delivery-status; boundary=b\r\n\r\n--b\r\nContent-Type: message/delivery-status\r\n\r\nFinal-Recipient: rfc822; x@example.org\r\n",
	} {
		reps, err := ParseReport(strings.NewReader(raw))
		if err == nil && len(reps) > 0 {
			t.Errorf("%s: read as %+v", name, reps)
		}
		if name == "plain mail" && !errors.Is(err, ErrNotAReport) {
			t.Errorf("plain mail: %v, want ErrNotAReport", err)
		}
	}
}

// TestParseReadsAHandfulOfRecipients: a report with 999 failed recipient
// blocks (79 KB) gives at most MaxRecipientBlocks reports; the rest is not
// read.
func TestParseReadsAHandfulOfRecipients(t *testing.T) {
	var b strings.Builder
	b.WriteString("Content-Type: multipart/report; report-type=delivery-status; boundary=b\r\n\r\n--b\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx.example.net\r\n")
	for i := range 999 {
		fmt.Fprintf(&b, "\r\nFinal-Recipient: rfc822; victim%03d@example.org\r\nAction: failed\r\nStatus: 5.1.1\r\n", i)
	}
	b.WriteString("\r\n--b--\r\n")
	reps, err := ParseReport(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) == 0 || len(reps) > MaxRecipientBlocks {
		t.Fatalf("%d reports from one mail, want 1 to %d", len(reps), MaxRecipientBlocks)
	}
}
