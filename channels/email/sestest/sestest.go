// Package sestest runs a stand-in for the Amazon SES v2 API on a loopback
// port inside a test. It checks every request as SES would: the SigV4
// Authorization header, recomputed here with an implementation of its own
// (not the SDK's signer), and the documented SendEmail request (POST
// /v2/email/outbound-emails, JSON with Content.Raw.Data, the raw MIME in
// base64). It records the mails it accepts and answers scripted attempts
// with SES's documented errors, so the SES transport is tested over HTTP
// against the protocol it will meet in production.
package sestest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/poll"
)

// The credentials a client must sign with.
const (
	AccessKeyID     = "AKIDSESTEST0000000001"
	SecretAccessKey = "sestest/secret/key/0123456789abcdefghij"
)

// Message is one accepted SendEmail request.
type Message struct {
	// Data is the raw MIME exactly as the client sent it.
	Data   []byte
	Header mail.Header
	// To are Destination.ToAddresses: the envelope recipients.
	To []string
	// FeedbackTo is FeedbackForwardingEmailAddress, where SES forwards
	// bounces and complaints; From is FromEmailAddress ("" when unset).
	FeedbackTo, From string
	MessageID        string // the id the server answered with
	delivered        []byte
}

// Delivered is the message as a receiver gets it from SES, made when the
// server accepted it (deliver).
func (m Message) Delivered() []byte { return m.delivered }

// sesHeaders are the header fields SES writes into every message it
// sends, whatever the raw message held ("Amazon SES header fields"; and
// seen on any mail SES delivered): it replaces Date and Message-ID, and
// adds X-SES-Outgoing (its sending host) and its own Feedback-ID (its
// feedback loop's stream id). The message's own Date, Message-ID and
// X-SES-Outgoing are dropped; a Feedback-ID of its own stays beside
// SES's (a mail sent with one arrives with two), so a sender on SES
// writes none. A DKIM signature covering any of them, or signing their
// absence, fails after SES.
var sesHeaders = []string{"Date", "Message-ID", "X-SES-Outgoing"}

// deliver is data as SES delivers it, for the message SES numbered id:
// SES's own fields first, as a relay adds them, then the message's header
// without the fields SES replaces, then the body.
func deliver(data []byte, id string) []byte {
	head, body, _ := bytes.Cut(data, []byte("\r\n\r\n"))
	var out bytes.Buffer
	out.WriteString("X-SES-Outgoing: 2026.12.07-54.240.8.21\r\n")
	fmt.Fprintf(&out, "Feedback-ID: ::1.us-east-1.%s=:AmazonSES\r\n", id)
	lines := strings.Split(string(head), "\r\n")
	for i := 0; i < len(lines); i++ {
		name, _, _ := strings.Cut(lines[i], ":")
		if slices.ContainsFunc(sesHeaders, func(h string) bool { return strings.EqualFold(h, strings.TrimSpace(name)) }) {
			for i+1 < len(lines) && (strings.HasPrefix(lines[i+1], " ") || strings.HasPrefix(lines[i+1], "\t")) {
				i++ // the field's folded lines
			}
			continue
		}
		out.WriteString(lines[i] + "\r\n")
	}
	fmt.Fprintf(&out, "Message-ID: <%s@email.amazonses.com>\r\n", id)
	out.WriteString("Date: Mon, 7 Dec 2026 09:00:00 +0000\r\n\r\n")
	out.Write(body)
	return out.Bytes()
}

// Fault is an error answer.
type Fault struct {
	Status int    // HTTP status (400 when 0)
	Code   string // such as MessageRejected
	// InBody names the error in the JSON body's __type instead of the
	// x-amzn-ErrorType header (SES and the SDK know both).
	InBody bool
}

// Script decides the answer to the attempt-th try (from 1) to send to rcpt;
// nil accepts.
type Script func(rcpt string, attempt int) *Fault

// Server is a running stand-in.
type Server struct {
	Region string
	srv    *httptest.Server

	mu       sync.Mutex
	script   Script
	msgs     []Message
	attempts map[string]int
	refused  []string // requests refused for their form or signature
}

// Start runs a server for region until the test ends.
func Start(t testing.TB, region string) *Server {
	t.Helper()
	s := &Server{Region: region, attempts: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// URL is an endpoint (NEWSLETTER_SES_ENDPOINT) that reaches the server.
func (s *Server) URL() string { return s.srv.URL }

// SetScript replaces the script.
func (s *Server) SetScript(fn Script) { s.mu.Lock(); s.script = fn; s.mu.Unlock() }

// Messages are the accepted mails, oldest first.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.msgs)
}

// Attempts is how many well-formed, correctly signed requests tried rcpt.
func (s *Server) Attempts(rcpt string) int { s.mu.Lock(); defer s.mu.Unlock(); return s.attempts[rcpt] }

// Refused lists why requests were refused for their form or signature:
// a client of the real API would have failed there.
func (s *Server) Refused() []string { s.mu.Lock(); defer s.mu.Unlock(); return slices.Clone(s.refused) }

// WaitFor waits until n mails were accepted and returns them.
func (s *Server) WaitFor(t testing.TB, n int, timeout time.Duration) []Message {
	t.Helper()
	poll.True(t, timeout, fmt.Sprintf("%d mails at the SES stand-in", n), func() bool {
		return len(s.Messages()) >= n
	})
	return s.Messages()
}

// To returns the accepted mails to rcpt.
func (s *Server) To(rcpt string) []Message {
	var out []Message
	for _, m := range s.Messages() {
		if slices.Contains(m.To, rcpt) {
			out = append(out, m)
		}
	}
	return out
}

type sendEmailRequest struct {
	Content struct {
		Raw *struct {
			Data []byte // encoding/json reads base64 into []byte
		}
		Simple, Template json.RawMessage
	}
	Destination *struct {
		ToAddresses, CcAddresses, BccAddresses []string
	}
	FeedbackForwardingEmailAddress string
	FromEmailAddress               string
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.refuse(w, http.StatusBadRequest, "BadRequestException", "read body: "+err.Error())
		return
	}
	if err := s.verifySigV4(r, body); err != nil {
		s.refuse(w, http.StatusForbidden, "InvalidSignatureException", err.Error())
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v2/email/outbound-emails" {
		s.refuse(w, http.StatusNotFound, "NotFoundException", r.Method+" "+r.URL.Path+" is not SendEmail")
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		s.refuse(w, http.StatusBadRequest, "BadRequestException", "Content-Type "+ct)
		return
	}
	var req sendEmailRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields() // a field SendEmail does not have is a mistake
	if err := dec.Decode(&req); err != nil {
		s.refuse(w, http.StatusBadRequest, "BadRequestException", "body: "+err.Error())
		return
	}
	if req.Content.Raw == nil || len(req.Content.Raw.Data) == 0 || req.Content.Simple != nil || req.Content.Template != nil {
		s.refuse(w, http.StatusBadRequest, "BadRequestException", "want Content.Raw.Data alone")
		return
	}
	if req.Destination == nil || len(req.Destination.ToAddresses) != 1 || len(req.Destination.CcAddresses)+len(req.Destination.BccAddresses) > 0 {
		s.refuse(w, http.StatusBadRequest, "BadRequestException", "want exactly one recipient in Destination.ToAddresses")
		return
	}
	msg, err := mail.ReadMessage(bytes.NewReader(req.Content.Raw.Data))
	if err != nil || !bytes.Contains(req.Content.Raw.Data, []byte("\r\n\r\n")) {
		s.refuse(w, http.StatusBadRequest, "BadRequestException", fmt.Sprintf("raw data is not a MIME message with CRLF lines: %v", err))
		return
	}
	rcpt := req.Destination.ToAddresses[0]
	s.mu.Lock()
	s.attempts[rcpt]++
	attempt, script := s.attempts[rcpt], s.script
	s.mu.Unlock()
	if script != nil {
		if f := script(rcpt, attempt); f != nil {
			status := f.Status
			if status == 0 {
				status = http.StatusBadRequest
			}
			w.Header().Set("Content-Type", "application/json")
			if f.InBody {
				w.WriteHeader(status)
				fmt.Fprintf(w, `{"__type":"com.amazonaws.sesv2#%s","message":"scripted %s"}`, f.Code, f.Code)
				return
			}
			// As the API sends it: the code, then the type's namespace.
			w.Header().Set("X-Amzn-ErrorType", f.Code+":http://internal.amazon.com/coral/com.amazonaws.sesv2/")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"message":"scripted %s"}`, f.Code)
			return
		}
	}
	s.mu.Lock()
	id := fmt.Sprintf("0100019ses%06d", len(s.msgs)+1)
	s.msgs = append(s.msgs, Message{
		Data: req.Content.Raw.Data, Header: msg.Header, To: req.Destination.ToAddresses,
		FeedbackTo: req.FeedbackForwardingEmailAddress, From: req.FromEmailAddress, MessageID: id,
		delivered: deliver(req.Content.Raw.Data, id),
	})
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"MessageId":%q}`, id)
}

func (s *Server) refuse(w http.ResponseWriter, status int, code, why string) {
	s.mu.Lock()
	s.refused = append(s.refused, code+": "+why)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", code)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": why}) // the client reads the header
}

var authPattern = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/,]+)/(\d{8})/([^/,]+)/([^/,]+)/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$`)

// verifySigV4 checks the request's Signature Version 4 signature as AWS
// documents it ("Create a signed AWS API request"): the credential scope
// names our key, today's date, the server's region and the service "ses";
// the signed headers include host and x-amz-date; and the signature,
// recomputed from the canonical request over the body, matches.
func (s *Server) verifySigV4(r *http.Request, body []byte) error {
	m := authPattern.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		return fmt.Errorf("Authorization %q is not a SigV4 header", r.Header.Get("Authorization"))
	}
	key, date, region, service, signed, signature := m[1], m[2], m[3], m[4], m[5], m[6]
	amzDate := r.Header.Get("X-Amz-Date")
	switch {
	case key != AccessKeyID:
		return fmt.Errorf("signed with key %s", key)
	case region != s.Region:
		return fmt.Errorf("credential scope region %s, want %s", region, s.Region)
	case service != "ses":
		return fmt.Errorf("credential scope service %s, want ses", service)
	case !strings.HasPrefix(amzDate, date):
		return fmt.Errorf("X-Amz-Date %q is not of the scope's day %s", amzDate, date)
	}
	at, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil {
		return fmt.Errorf("X-Amz-Date %q: %v", amzDate, err)
	}
	if d := time.Since(at); d > 15*time.Minute || d < -15*time.Minute {
		return fmt.Errorf("X-Amz-Date %s is more than 15 minutes off", amzDate)
	}
	names := strings.Split(signed, ";")
	if !sort.StringsAreSorted(names) || !slices.Contains(names, "host") || !slices.Contains(names, "x-amz-date") {
		return fmt.Errorf("SignedHeaders %q: want sorted, with host and x-amz-date", signed)
	}
	if hash := r.Header.Get("X-Amz-Content-Sha256"); hash != "" && hash != hexSHA256(body) {
		return fmt.Errorf("X-Amz-Content-Sha256 is not the body's")
	}
	var canon strings.Builder
	canon.WriteString(r.Method + "\n" + r.URL.EscapedPath() + "\n" + r.URL.Query().Encode() + "\n")
	for _, n := range names {
		var v string
		switch n {
		case "host":
			v = r.Host
		case "content-length":
			v = fmt.Sprint(r.ContentLength)
		default:
			v = strings.Join(r.Header.Values(n), ",")
		}
		canon.WriteString(n + ":" + strings.Join(strings.Fields(v), " ") + "\n")
	}
	canon.WriteString("\n" + signed + "\n" + hexSHA256(body))
	scope := date + "/" + region + "/" + service + "/aws4_request"
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hexSHA256([]byte(canon.String()))
	k := hmacSHA256([]byte("AWS4"+SecretAccessKey), date)
	for _, part := range []string{region, service, "aws4_request"} {
		k = hmacSHA256(k, part)
	}
	if want := hex.EncodeToString(hmacSHA256(k, toSign)); !hmac.Equal([]byte(want), []byte(signature)) {
		return fmt.Errorf("signature does not match the canonical request:\n%s", canon.String())
	}
	return nil
}

func hexSHA256(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}
