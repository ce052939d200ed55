package email

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/newsletter/newsletter/channels/email/sestest"
)

// newTestSES is an SES transport signed with the stand-in's key, against
// srv, with retries that do not wait.
func newTestSES(t *testing.T, srv *sestest.Server, edit ...func(*SESOptions)) *SES {
	t.Helper()
	o := SESOptions{
		Region: srv.Region, Endpoint: srv.URL(), MaxBackoff: time.Millisecond,
		Credentials: credentials.NewStaticCredentialsProvider(sestest.AccessKeyID, sestest.SecretAccessKey, ""),
	}
	for _, e := range edit {
		e(&o)
	}
	s, err := NewSES(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var rawMIME = []byte("From: News <news@example.com>\r\nTo: reader@example.org\r\nSubject: Hi\r\n" +
	"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=UTF-8\r\n\r\nHello\r\n.\r\nA dot line stays as it is.\r\n")

// TestSESSendsTheRawBytesSigned: one SendEmail request, signed with SigV4
// for the region and service ses, carrying the MIME bytes unchanged, the
// recipient as the envelope and the VERP address for feedback.
func TestSESSendsTheRawBytesSigned(t *testing.T) {
	srv := sestest.Start(t, "eu-central-1")
	s := newTestSES(t, srv)
	if err := s.SendRaw(context.Background(), "bounces+t1@b.example.com", "reader@example.org", rawMIME); err != nil {
		t.Fatalf("send: %v (refused: %v)", err, srv.Refused())
	}
	if r := srv.Refused(); len(r) > 0 {
		t.Fatalf("the stand-in refused: %v", r)
	}
	msgs := srv.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d mails", len(msgs))
	}
	m := msgs[0]
	if !bytes.Equal(m.Data, rawMIME) {
		t.Errorf("raw data changed on the way:\n%q\nwant\n%q", m.Data, rawMIME)
	}
	if len(m.To) != 1 || m.To[0] != "reader@example.org" || m.FeedbackTo != "bounces+t1@b.example.com" {
		t.Errorf("envelope: to %v, feedback to %q", m.To, m.FeedbackTo)
	}
}

// TestSESStandInChecksTheSignature: a request signed with another secret,
// or for another region, is refused (the check can fail).
func TestSESStandInChecksTheSignature(t *testing.T) {
	srv := sestest.Start(t, "us-east-1")
	for name, edit := range map[string]func(*SESOptions){
		"secret": func(o *SESOptions) {
			o.Credentials = credentials.NewStaticCredentialsProvider(sestest.AccessKeyID, "not-the-secret", "")
		},
		"region": func(o *SESOptions) { o.Region = "eu-west-1" },
	} {
		s := newTestSES(t, srv, edit, func(o *SESOptions) { o.MaxAttempts = 1 })
		before := len(srv.Refused())
		err := s.SendRaw(context.Background(), "news@example.com", "reader@example.org", rawMIME)
		if err == nil || len(srv.Refused()) != before+1 || !strings.Contains(srv.Refused()[before], "InvalidSignatureException") {
			t.Errorf("%s: err %v, refused %v", name, err, srv.Refused())
		}
	}
	if len(srv.Messages()) != 0 {
		t.Fatal("a badly signed request was accepted")
	}
}

// TestSESAnswersMapOntoClasses: each documented error, named in the
// x-amzn-ErrorType header or in the body's __type, becomes the class the
// worker acts on; throttling and 5xx are retried inside the SDK first.
func TestSESAnswersMapOntoClasses(t *testing.T) {
	cases := []struct {
		code   string
		status int
		inBody bool
		class  Class
		paused bool
		tries  int
	}{
		{"TooManyRequestsException", http.StatusTooManyRequests, false, Temporary, false, DefaultSESAttempts},
		{"LimitExceededException", http.StatusBadRequest, true, Temporary, false, DefaultSESAttempts},
		{"Throttling", http.StatusBadRequest, false, Temporary, false, DefaultSESAttempts},
		{"InternalServiceErrorException", http.StatusInternalServerError, false, Temporary, false, DefaultSESAttempts},
		{"MessageRejected", http.StatusBadRequest, false, Rejected, false, 1},
		{"MessageRejected", http.StatusBadRequest, true, Rejected, false, 1},
		{"MailFromDomainNotVerifiedException", http.StatusBadRequest, false, Rejected, false, 1},
		{"AccessDeniedException", http.StatusForbidden, false, Rejected, false, 1},
		{"NotFoundException", http.StatusNotFound, false, Rejected, false, 1},
		{"BadRequestException", http.StatusBadRequest, true, Invalid, false, 1},
		{"SendingPausedException", http.StatusBadRequest, false, Temporary, true, 1},
		{"AccountSendingPausedException", http.StatusBadRequest, true, Temporary, true, 1},
		{"AccountSuspendedException", http.StatusBadRequest, false, Temporary, true, 1},
	}
	srv := sestest.Start(t, "us-east-1")
	faults := map[string]*sestest.Fault{}
	srv.SetScript(func(rcpt string, _ int) *sestest.Fault { return faults[rcpt] })
	for i, c := range cases {
		rcpt := strings.ToLower(c.code) + map[bool]string{true: ".body", false: ".header"}[c.inBody] + "@example.org"
		faults[rcpt] = &sestest.Fault{Status: c.status, Code: c.code, InBody: c.inBody}
		s := newTestSES(t, srv) // a fresh one: a pause holds every later send
		err := s.SendRaw(context.Background(), "news@example.com", rcpt, rawMIME)
		se := AsSendError(err)
		if se == nil {
			t.Errorf("%d %s: %v is not a SendError", i, c.code, err)
			continue
		}
		if se.Class != c.class || (AsPaused(err) != nil) != c.paused || se.Domain != "example.org" {
			t.Errorf("%d %s: class %s, paused %v, domain %s; want %s, paused %v", i, c.code, se.Class, AsPaused(err) != nil, se.Domain, c.class, c.paused)
		}
		if !c.paused && !strings.Contains(err.Error(), c.code) {
			t.Errorf("%d %s: the error does not name the answer: %v", i, c.code, err)
		}
		if got := srv.Attempts(rcpt); got != c.tries {
			t.Errorf("%d %s: %d tries, want %d", i, c.code, got, c.tries)
		}
	}
	if r := srv.Refused(); len(r) > 0 || len(srv.Messages()) > 0 {
		t.Fatalf("refused %v, accepted %d", r, len(srv.Messages()))
	}
}

// TestSESThrottlingIsRetriedWithBackoff: two throttled answers, then the
// mail goes out, once, within the same send.
func TestSESThrottlingIsRetriedWithBackoff(t *testing.T) {
	srv := sestest.Start(t, "us-east-1")
	srv.SetScript(func(_ string, attempt int) *sestest.Fault {
		if attempt <= 2 {
			return &sestest.Fault{Status: http.StatusTooManyRequests, Code: "TooManyRequestsException"}
		}
		return nil
	})
	s := newTestSES(t, srv)
	if err := s.SendRaw(context.Background(), "news@example.com", "reader@example.org", rawMIME); err != nil {
		t.Fatal(err)
	}
	if n, tries := len(srv.Messages()), srv.Attempts("reader@example.org"); n != 1 || tries != 3 {
		t.Fatalf("%d mails after %d tries", n, tries)
	}
}

// TestSESPauseHoldsMailWithoutAsking: after a pause answer every send is
// held, without a request, until the pause has run out; then the next send
// asks SES again and goes out.
func TestSESPauseHoldsMailWithoutAsking(t *testing.T) {
	srv := sestest.Start(t, "us-east-1")
	srv.SetScript(func(rcpt string, attempt int) *sestest.Fault {
		if rcpt == "a@example.org" && attempt == 1 {
			return &sestest.Fault{Code: "SendingPausedException"}
		}
		return nil
	})
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	s := newTestSES(t, srv, func(o *SESOptions) { o.PauseFor = 10 * time.Minute })
	s.now = func() time.Time { return now }
	ctx := context.Background()
	err := s.SendRaw(ctx, "news@example.com", "a@example.org", rawMIME)
	if pe := AsPaused(err); pe == nil || pe.RetryAfter() != 10*time.Minute || AsSendError(err).RetryAfter != 10*time.Minute {
		t.Fatalf("first answer: %v", err)
	}
	now = now.Add(9 * time.Minute)
	err = s.SendRaw(ctx, "news@example.com", "b@example.org", rawMIME)
	if pe := AsPaused(err); pe == nil || pe.RetryAfter() != time.Minute || srv.Attempts("b@example.org") != 0 {
		t.Fatalf("during the pause: %v, %d requests", err, srv.Attempts("b@example.org"))
	}
	now = now.Add(time.Minute)
	if err := s.SendRaw(ctx, "news@example.com", "a@example.org", rawMIME); err != nil {
		t.Fatalf("after the pause: %v", err)
	}
	if err := s.SendRaw(ctx, "news@example.com", "b@example.org", rawMIME); err != nil || len(srv.Messages()) != 2 {
		t.Fatalf("the pause did not lift: %v, %d mails", err, len(srv.Messages()))
	}
}
