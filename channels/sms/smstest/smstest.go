// Package smstest is a Twilio-shaped Messages API for tests (an
// httptest.Server): POST /2010-04-01/Accounts/{AccountSid}/Messages.json
// with Basic auth and a form (To, Body, and From or MessagingServiceSid),
// answered as Twilio answers: 201 and the message's JSON, or an error
// JSON {"code","message","more_info","status"}. It records the messages
// it took, and can be told to hang, to fail the next requests (429, 5xx,
// with Retry-After) or to refuse a number for good (21610, 21211, ...).
// A message sent with a StatusCallback gets its status callbacks posted
// there as Twilio posts them (sent, then delivered, or undelivered with
// an ErrorCode for a number set with Undelivered), signed. It also signs
// inbound callbacks as Twilio does (SignedInbound).
//
// It shares no code with package sms: the signature and the checks are
// written here again, so a test that passes through both has proven them.
package smstest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/poll"
)

// Message is one message the fake took.
type Message struct {
	SID  string
	To   string
	From string
	// MessagingServiceSID is set instead of From when the client named a
	// messaging service.
	MessagingServiceSID string
	Body                string
	// StatusCallback is the URL the client asked the status posted to.
	StatusCallback string
	At             time.Time
}

// Callback is one status callback the fake posted, with the answer it got
// (Status 0 and Err when the post failed).
type Callback struct {
	MessageSID, MessageStatus, ErrorCode, To string
	Status                                   int
	Err                                      error
}

// Server is the fake gateway.
type Server struct {
	// URL is the API base (http://127.0.0.1:port), for sms.Client.BaseURL.
	URL string
	// AccountSID and AuthToken are the only credentials it accepts.
	AccountSID string
	AuthToken  string

	srv *httptest.Server

	mu        sync.Mutex
	messages  []Message
	attempts  int
	hang      chan struct{} // non-nil while hanging; closed by Release
	failNext  int
	failWith  failure
	permanent map[string]int // To → Twilio error code
	// undelivered: To → the ErrorCode of its messages' last status
	// callback (taken, then undelivered).
	undelivered map[string]int
	// routes: a callback URL's prefix → where the post goes instead (a
	// proxy in front of the service, whose public URL is signed).
	routes    map[string]string
	callbacks []Callback
	reporting sync.WaitGroup
}

type failure struct {
	status     int
	retryAfter string
}

// New starts a fake with a fresh account SID and auth token; it stops when
// the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		AccountSID: "AC" + randomHex(16),
		AuthToken:  randomHex(16),
		permanent:  map[string]int{}, undelivered: map[string]int{}, routes: map[string]string{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close releases any held request, stops the fake and waits for the
// status callbacks it is posting.
func (s *Server) Close() {
	s.Release()
	s.srv.Close()
	s.reporting.Wait()
}

// Hang makes the fake take requests and not answer them, until Release or
// until their client gives up.
func (s *Server) Hang() {
	s.mu.Lock()
	if s.hang == nil {
		s.hang = make(chan struct{})
	}
	s.mu.Unlock()
}

// Release ends Hang. A held request is then answered 503 and its message
// not taken (its client has most likely given up and will send again), so
// a message is taken only by a request that came while the fake was well
// and a test can count deliveries exactly. New requests are served as
// usual.
func (s *Server) Release() {
	s.mu.Lock()
	if s.hang != nil {
		close(s.hang)
		s.hang = nil
	}
	s.mu.Unlock()
}

// FailNext makes the next n well-formed, authenticated requests answer
// status (429 or 5xx, say), with a Retry-After header when retryAfter is
// not empty ("7", or an HTTP date). Their messages are not taken.
func (s *Server) FailNext(n, status int, retryAfter string) {
	s.mu.Lock()
	s.failNext = n
	s.failWith = failure{status, retryAfter}
	s.mu.Unlock()
}

// Permanent makes every message to the number to (E.164) answer 400 with
// Twilio error code: 21610 (the reader texted STOP), 21211 (invalid),
// 21614 (not a mobile), 21408 (region not enabled), ...
func (s *Server) Permanent(to string, code int) {
	s.mu.Lock()
	s.permanent[to] = code
	s.mu.Unlock()
}

// Undelivered makes every message to the number to (E.164) be taken (201)
// and then reported undelivered with Twilio error code in its status
// callback: 30006 (a landline), 30005 (unknown number), 30003 (handset
// off), 30008 (unknown error), ...
func (s *Server) Undelivered(to string, code int) {
	s.mu.Lock()
	s.undelivered[to] = code
	s.mu.Unlock()
}

// RouteCallbacks posts the status callbacks whose URL starts with public
// to listener instead (the same path and query after it), still signed
// over the public URL: as Twilio calls the service's public origin and a
// proxy passes the call on.
func (s *Server) RouteCallbacks(public, listener string) {
	s.mu.Lock()
	s.routes[public] = listener
	s.mu.Unlock()
}

// Callbacks lists the status callbacks posted, in order.
func (s *Server) Callbacks() []Callback {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Callback(nil), s.callbacks...)
}

// WaitCallbacks waits until at least n status callbacks were posted and
// answered, and answers them; the test fails if that does not happen
// within poll.BusyMachine.
func (s *Server) WaitCallbacks(t testing.TB, n int) []Callback {
	t.Helper()
	poll.Until(t, poll.BusyMachine, func() error {
		if got := len(s.Callbacks()); got < n {
			return fmt.Errorf("twiliotest: %d status callbacks posted, waiting for %d", got, n)
		}
		return nil
	})
	return s.Callbacks()
}

// Messages lists the messages taken (answered 201), in order.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// Attempts counts the requests that reached the fake, whatever their
// answer (a held one included).
func (s *Server) Attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

// WaitFor waits until at least n messages were taken, and answers them;
// the test fails if that does not happen within poll.BusyMachine.
func (s *Server) WaitFor(t testing.TB, n int) []Message {
	t.Helper()
	poll.Until(t, poll.BusyMachine, func() error {
		if got := len(s.Messages()); got < n {
			return fmt.Errorf("twiliotest: %d messages taken, waiting for %d", got, n)
		}
		return nil
	})
	return s.Messages()
}

// SignedInbound builds the POST Twilio makes to a webhook at fullURL
// (an inbound message: From, To, Body, MessageSid, ...), its form
// url-encoded and signed with the fake's auth token in X-Twilio-Signature.
// It panics on a URL that does not parse, a mistake in the test itself.
func (s *Server) SignedInbound(fullURL string, form url.Values) *http.Request {
	req, err := http.NewRequest(http.MethodPost, fullURL, strings.NewReader(form.Encode()))
	if err != nil {
		panic(fmt.Sprintf("twiliotest: SignedInbound(%q): %v", fullURL, err))
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", Signature(s.AuthToken, fullURL, form))
	return req
}

// Signature is Twilio's X-Twilio-Signature of a callback to fullURL with
// form: base64 of HMAC-SHA1, under the auth token, of the URL followed by
// each field's name and value, names sorted, a repeated name's distinct
// values sorted. Checked against Twilio's own libraries: twilio-go
// client/request_validator.go (RequestValidator.Validate: the URL, then
// each name+value sorted, HMAC-SHA1 keyed by the auth token, standard
// base64, and the URL tried with and without its default port) and
// twilio-python's RequestValidator (compute_signature), and Twilio's
// "Webhooks security" page (twilio.com/docs/usage/webhooks/webhooks-security).
func Signature(authToken, fullURL string, form url.Values) string {
	data := fullURL
	names := make([]string, 0, len(form))
	for k := range form {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		seen := map[string]bool{}
		var values []string
		for _, v := range form[k] {
			if !seen[v] {
				seen[v] = true
				values = append(values, v)
			}
		}
		sort.Strings(values)
		for _, v := range values {
			data += k + v
		}
	}
	mac := hmac.New(sha1.New, []byte(authToken))
	mac.Write([]byte(data))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// e164 is the form Twilio requires of To: +, a country code not starting
// with 0, at most 15 digits in all.
var e164 = regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`)

// maxBody is Twilio's limit on a message body, in characters.
const maxBody = 1600

// errorMessages are Twilio's messages for the codes the fake answers.
var errorMessages = map[int]string{
	20003: "Authenticate",
	20404: "The requested resource was not found",
	20429: "Too Many Requests",
	20500: "Internal Server Error",
	20503: "Service Unavailable",
	21211: "Invalid 'To' Phone Number",
	21214: "'To' phone number cannot be reached",
	21268: "Sending to Premium rate or Information Service numbers is not allowed",
	21408: "Permission to send an SMS has not been enabled for the region",
	21602: "Message body is required.",
	21603: "A 'From' or 'MessagingServiceSid' parameter is required to send a message",
	21604: "A 'To' phone number is required.",
	21610: "Attempt to send to unsubscribed recipient",
	21612: "The 'To' phone number is not currently reachable via SMS",
	21614: "'To' number is not a valid mobile number",
	21609: "Invalid StatusCallback",
	21617: "The concatenated message body exceeds the 1600 character limit.",
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.attempts++
	hang := s.hang
	s.mu.Unlock()
	// The body is read first: only then does the server notice a client
	// that hangs up (and cancel the request's context).
	raw, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		return
	}
	if hang != nil {
		select {
		case <-hang:
			writeError(w, http.StatusServiceUnavailable, 20503, "")
		case <-r.Context().Done():
		}
		return
	}
	if id, token, ok := r.BasicAuth(); !ok || id != s.AccountSID || token != s.AuthToken {
		writeError(w, http.StatusUnauthorized, 20003, "")
		return
	}
	if r.URL.Path != "/2010-04-01/Accounts/"+s.AccountSID+"/Messages.json" {
		writeError(w, http.StatusNotFound, 20404, "")
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, 20004, "Method not allowed")
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		writeError(w, http.StatusBadRequest, 21604, "want a form, got Content-Type "+ct)
		return
	}
	form, err := url.ParseQuery(string(raw))
	if err != nil {
		writeError(w, http.StatusBadRequest, 21604, "form: "+err.Error())
		return
	}
	to, from, service, body := form.Get("To"), form.Get("From"), form.Get("MessagingServiceSid"), form.Get("Body")
	switch {
	case to == "":
		writeError(w, http.StatusBadRequest, 21604, "")
		return
	case !e164.MatchString(to):
		writeError(w, http.StatusBadRequest, 21211, fmt.Sprintf("The 'To' number %s is not a valid phone number.", to))
		return
	case (from == "") == (service == ""):
		// Twilio takes both (the service wins); the fake wants exactly one,
		// so a client that sends both is caught.
		writeError(w, http.StatusBadRequest, 21603, "give exactly one of From and MessagingServiceSid")
		return
	case from != "" && !e164.MatchString(from):
		writeError(w, http.StatusBadRequest, 21603, fmt.Sprintf("The 'From' number %s is not a valid phone number.", from))
		return
	case service != "" && !strings.HasPrefix(service, "MG"):
		writeError(w, http.StatusBadRequest, 21603, "MessagingServiceSid must start with MG")
		return
	case strings.TrimSpace(body) == "":
		writeError(w, http.StatusBadRequest, 21602, "")
		return
	case len([]rune(body)) > maxBody:
		writeError(w, http.StatusBadRequest, 21617, "")
		return
	}
	s.mu.Lock()
	code := s.permanent[to]
	fail := s.failNext > 0
	if fail {
		s.failNext--
	}
	f := s.failWith
	s.mu.Unlock()
	if code != 0 {
		writeError(w, http.StatusBadRequest, code, "")
		return
	}
	if fail {
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		writeError(w, f.status, 20000+f.status, http.StatusText(f.status))
		return
	}
	callback := form.Get("StatusCallback")
	if !validCallback(callback) {
		writeError(w, http.StatusBadRequest, 21609, "")
		return
	}
	m := s.take(Message{SID: "SM" + randomHex(16), To: to, From: from, MessagingServiceSID: service, Body: body, StatusCallback: callback, At: time.Now()})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	answer := map[string]any{
		"sid": m.SID, "account_sid": s.AccountSID, "to": to, "from": nilIfEmpty(from),
		"messaging_service_sid": nilIfEmpty(service), "body": body, "status": "queued",
		"direction": "outbound-api", "api_version": "2010-04-01", "error_code": nil, "error_message": nil,
		"date_created": m.At.UTC().Format(time.RFC1123Z), "date_sent": nil,
		"uri": "/2010-04-01/Accounts/" + s.AccountSID + "/Messages/" + m.SID + ".json",
	}
	_ = json.NewEncoder(w).Encode(answer) // the client may have gone; the message is taken either way
}

// validCallback reports whether a StatusCallback is empty or an absolute
// http(s) URL, as Twilio requires (21609 otherwise).
func validCallback(callback string) bool {
	if callback == "" {
		return true
	}
	u, err := url.Parse(callback)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

// take records m as taken and, when it names a StatusCallback, starts
// posting its statuses there.
func (s *Server) take(m Message) Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages = append(s.messages, m)
	if m.StatusCallback != "" {
		s.reporting.Add(1)
		go s.report(m, s.undelivered[m.To])
	}
	return m
}

// report posts m's status callbacks one after another, as Twilio does
// once the message leaves: sent, then delivered, or undelivered with
// failCode when it is not 0. Each is a form, url-encoded, with the fields
// Twilio's status callbacks carry (MessageSid, SmsSid, MessageStatus,
// SmsStatus, AccountSid, From or MessagingServiceSid, To, ApiVersion, and
// ErrorCode on a failure; no Body, which only an inbound message has),
// signed with the auth token over the callback URL as given.
func (s *Server) report(m Message, failCode int) {
	defer s.reporting.Done()
	last, code := "delivered", ""
	if failCode != 0 {
		last, code = "undelivered", strconv.Itoa(failCode)
	}
	for _, status := range []string{"sent", last} {
		form := url.Values{
			"MessageSid": {m.SID}, "SmsSid": {m.SID}, "MessageStatus": {status}, "SmsStatus": {status},
			"AccountSid": {s.AccountSID}, "To": {m.To}, "ApiVersion": {"2010-04-01"},
		}
		if m.From != "" {
			form.Set("From", m.From)
		} else {
			form.Set("MessagingServiceSid", m.MessagingServiceSID)
		}
		if status == "undelivered" {
			form.Set("ErrorCode", code)
		}
		cb := Callback{MessageSID: m.SID, MessageStatus: status, ErrorCode: form.Get("ErrorCode"), To: m.To}
		cb.Status, cb.Err = s.postCallback(m.StatusCallback, form)
		s.mu.Lock()
		s.callbacks = append(s.callbacks, cb)
		s.mu.Unlock()
	}
}

// callbackClient posts the status callbacks.
var callbackClient = &http.Client{Timeout: 10 * time.Second}

// callbackSlots bounds the callbacks posted at once (by all fakes): a
// test that sends thousands of texts gets their statuses as a steady
// stream, not thousands of connections at one moment.
var callbackSlots = make(chan struct{}, 8)

// postCallback posts form to the callback URL (or where RouteCallbacks
// sends it), signed over the URL as given; it answers the status code.
func (s *Server) postCallback(callback string, form url.Values) (int, error) {
	target := callback
	s.mu.Lock()
	for public, listener := range s.routes {
		if strings.HasPrefix(callback, public) {
			target = listener + strings.TrimPrefix(callback, public)
		}
	}
	s.mu.Unlock()
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", Signature(s.AuthToken, callback, form))
	callbackSlots <- struct{}{}
	defer func() { <-callbackSlots }()
	resp, err := callbackClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body) // read to reuse the connection; its content is not Twilio's concern
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// writeError answers Twilio's error JSON; message "" takes the code's.
func writeError(w http.ResponseWriter, status, code int, message string) {
	if message == "" {
		message = errorMessages[code]
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{ // the client may have gone: nothing to do
		"code": code, "message": message, "status": status,
		"more_info": fmt.Sprintf("https://www.twilio.com/docs/errors/%d", code),
	})
}

func nilIfEmpty(v string) any {
	if v == "" {
		return nil
	}
	return v
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // the system's randomness failed: nothing to test
	}
	return hex.EncodeToString(b)
}
