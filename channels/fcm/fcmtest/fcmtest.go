// Package fcmtest is Firebase Cloud Messaging for tests (an
// httptest.Server speaking HTTP v1 and Google's OAuth 2 token endpoint).
// New makes a service account: a fresh RSA key and its key file, whose
// token_uri is this server. The token endpoint verifies the JWT assertion
// as Google does (RS256 under the account's public key, kid, iss, aud,
// scope, exp) and issues access tokens; messages:send takes a message only
// with an access token it issued and that has not expired. Errors are
// google.rpc.Status JSON with an FcmError detail where FCM gives one
// (UNREGISTERED with 404; none for a message over 4000 bytes of
// notification and data, a 400 INVALID_ARGUMENT). It can be made slow,
// answer 503 or 429 with Retry-After (Unavailable, Throttle), or say a
// token is unregistered. NewHTTP2 serves it over TLS and HTTP/2, as
// fcm.googleapis.com does, and the server counts connections and the
// most sends in flight at once, and can hold sends until enough are in
// flight (HoldUntil).
//
// The JWT check is written here from RFC 7515 and 7523, sharing no code
// with package fcm or golang.org/x/oauth2.
package fcmtest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/crowd"
	"github.com/newsletter/newsletter/internal/testkit/poll"
)

// The service account New makes.
const (
	ProjectID    = "newsletter-test"
	ClientEmail  = "sender@newsletter-test.iam.gserviceaccount.com"
	PrivateKeyID = "0123456789abcdef0123456789abcdef01234567"
	Scope        = "https://www.googleapis.com/auth/firebase.messaging"
)

// Message is one message the server took.
type Message struct {
	Token string
	Title string
	Body  string
	URL   string
	// TTL is android.ttl as sent, e.g. "86400s".
	TTL string
	// AccessToken is the bearer token it came with.
	AccessToken string
}

// Server is the test FCM and token endpoint.
type Server struct {
	// URL is the server's origin, for fcm.Client.BaseURL.
	URL string
	// CredentialsFile is the service account's key file.
	CredentialsFile string
	// Key is the service account's private key.
	Key *rsa.PrivateKey

	srv *httptest.Server

	crowd crowd.Crowd // sends in flight, held, and the connections

	mu           sync.Mutex
	tokenTTL     time.Duration
	issued       map[string]time.Time // access token -> expiry
	exchanges    int
	sends        int
	received     []Message
	rejected     []error
	expectBad    bool
	slow         time.Duration
	unavailable  int
	retryAfter   string
	unregistered map[string]bool
	failTokens   int
	failStatus   int
	answers      map[string]answer // by registration token
}

type answer struct {
	status     int
	errorCode  string
	message    string
	retryAfter string
}

// New starts the server and writes the key file into t.TempDir. It stops
// when the test ends, and the test fails then if an assertion or a
// message was rejected as malformed, unless ExpectRejections was called.
func New(t testing.TB) *Server {
	t.Helper()
	return newServer(t, false)
}

// NewHTTP2 is New served over TLS with HTTP/2 (URL is https://), as FCM
// is: a client trusts it with RootCAs (fcm.NewHTTPClient).
func NewHTTP2(t testing.TB) *Server {
	t.Helper()
	return newServer(t, true)
}

func newServer(t testing.TB, h2 bool) *Server {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("fcmtest: RSA key: %v", err)
	}
	s := &Server{Key: key, tokenTTL: time.Hour, issued: map[string]time.Time{},
		unregistered: map[string]bool{}, answers: map[string]answer{}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.crowd.CountConnections(s.srv.Config)
	if h2 {
		s.srv.EnableHTTP2 = true
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	s.URL = s.srv.URL
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("fcmtest: PKCS#8: %v", err)
	}
	account := map[string]string{
		"type":           "service_account",
		"project_id":     ProjectID,
		"private_key_id": PrivateKeyID,
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":   ClientEmail,
		"client_id":      "100000000000000000000",
		"auth_uri":       "https://accounts.google.com/o/oauth2/auth",
		"token_uri":      s.URL + "/token",
	}
	b, err := json.MarshalIndent(account, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	s.CredentialsFile = filepath.Join(t.TempDir(), "service-account.json")
	if err := os.WriteFile(s.CredentialsFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Release()
		s.srv.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.expectBad {
			for _, err := range s.rejected {
				t.Errorf("fcmtest rejected a request: %v", err)
			}
		}
	})
	return s
}

// RootCAs trusts the server's certificate (NewHTTP2's; nil for New's).
func (s *Server) RootCAs() *x509.CertPool {
	if s.srv.Certificate() == nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AddCert(s.srv.Certificate())
	return pool
}

// Connections counts the connections clients opened.
func (s *Server) Connections() int { return s.crowd.Connections() }

// MaxInFlight is the most sends the server had in flight at once.
func (s *Server) MaxInFlight() int { return s.crowd.MaxInFlight() }

// HoldUntil makes sends wait, unanswered, until n of them are in flight
// at once: a client that does not send them concurrently never gets an
// answer.
func (s *Server) HoldUntil(n int) { s.crowd.HoldUntil(n) }

// Release answers the sends HoldUntil holds, and holds no more.
func (s *Server) Release() { s.crowd.Release() }

// TokenTTL sets the lifetime (expires_in) of the access tokens issued
// from now on; the default is an hour, as Google's.
func (s *Server) TokenTTL(d time.Duration) {
	s.mu.Lock()
	s.tokenTTL = d
	s.mu.Unlock()
}

// FailExchanges answers the next n token exchanges status (with an OAuth
// error body), as Google's token endpoint does when it is down (5xx) or
// refuses the account (400 invalid_grant).
func (s *Server) FailExchanges(n, status int) {
	s.mu.Lock()
	s.failTokens, s.failStatus = n, status
	s.mu.Unlock()
}

// RevokeTokens makes every access token issued so far invalid: a message
// with one is answered 401 UNAUTHENTICATED.
func (s *Server) RevokeTokens() {
	s.mu.Lock()
	clear(s.issued)
	s.mu.Unlock()
}

// Slow makes every later send wait d before it is answered (or until its
// client gives up).
func (s *Server) Slow(d time.Duration) {
	s.mu.Lock()
	s.slow = d
	s.mu.Unlock()
}

// Unavailable answers the next n sends 503 UNAVAILABLE, with a
// Retry-After header when retryAfter is not empty.
func (s *Server) Unavailable(n int, retryAfter string) {
	s.mu.Lock()
	s.unavailable, s.retryAfter = n, retryAfter
	s.mu.Unlock()
}

// Unregistered makes every send to token answer 404 UNREGISTERED, as FCM
// does once the app is uninstalled.
func (s *Server) Unregistered(token string) {
	s.mu.Lock()
	s.unregistered[token] = true
	s.mu.Unlock()
}

// Answer makes every send to token answer status with an FcmError of
// errorCode and message (for the error mapping's tests).
func (s *Server) Answer(token string, status int, errorCode, message string) {
	s.mu.Lock()
	s.answers[token] = answer{status, errorCode, message, ""}
	s.mu.Unlock()
}

// Throttle makes every send to token answer 429 QUOTA_EXCEEDED (status
// 429) or 503 UNAVAILABLE (status 503), with retryAfter (seconds or an
// HTTP date) as its Retry-After header, as FCM does when a device or the
// project is over its rate or FCM is overloaded.
func (s *Server) Throttle(token string, status int, retryAfter string) {
	code, msg := "UNAVAILABLE", "The service is currently unavailable."
	if status == http.StatusTooManyRequests {
		code, msg = "QUOTA_EXCEEDED", "Quota exceeded for quota metric 'Send requests'."
	}
	s.mu.Lock()
	s.answers[token] = answer{status, code, msg, retryAfter}
	s.mu.Unlock()
}

// Clear makes sends to token be taken again.
func (s *Server) Clear(token string) {
	s.mu.Lock()
	delete(s.answers, token)
	delete(s.unregistered, token)
	s.mu.Unlock()
}

// ExpectRejections keeps rejected requests from failing the test.
func (s *Server) ExpectRejections() {
	s.mu.Lock()
	s.expectBad = true
	s.mu.Unlock()
}

// Received lists the messages taken, in order.
func (s *Server) Received() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.received...)
}

// Rejected lists why requests were refused as malformed or unauthorised.
func (s *Server) Rejected() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.rejected...)
}

// Exchanges counts the access tokens issued.
func (s *Server) Exchanges() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exchanges
}

// Sends counts the requests to messages:send, whatever their answer.
func (s *Server) Sends() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sends
}

// WaitFor waits until n messages have been taken.
func (s *Server) WaitFor(t testing.TB, n int) []Message {
	t.Helper()
	poll.Until(t, poll.BusyMachine, func() error {
		if got := len(s.Received()); got < n {
			return fmt.Errorf("fcmtest took %d messages, waiting for %d", got, n)
		}
		return nil
	})
	return s.Received()
}

func (s *Server) reject(w http.ResponseWriter, status int, rpcStatus string, err error) {
	s.mu.Lock()
	s.rejected = append(s.rejected, err)
	s.mu.Unlock()
	writeError(w, status, rpcStatus, "", err.Error())
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/token":
		s.serveToken(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/projects/"+ProjectID+"/messages:send":
		s.serveSend(w, r)
	default:
		http.Error(w, "no such route", http.StatusNotFound)
	}
}

// serveToken is the OAuth 2 JWT bearer grant (RFC 7523).
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	fail, status := s.failTokens > 0, s.failStatus
	if fail {
		s.failTokens--
	}
	s.mu.Unlock()
	if fail {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "temporarily_unavailable"}) // a write error is the client's going away
		return
	}
	if g := r.PostForm.Get("grant_type"); g != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		s.rejectGrant(w, fmt.Errorf("grant_type %q", g))
		return
	}
	if err := s.checkAssertion(r.PostForm.Get("assertion")); err != nil {
		s.rejectGrant(w, fmt.Errorf("assertion: %w", err))
		return
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	access := "ya29.test-" + hex.EncodeToString(raw[:])
	s.mu.Lock()
	ttl := s.tokenTTL
	s.issued[access] = time.Now().Add(ttl)
	s.exchanges++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{ // a write error is the client's going away
		"access_token": access, "token_type": "Bearer", "expires_in": int64(ttl / time.Second)})
}

func (s *Server) rejectGrant(w http.ResponseWriter, err error) {
	s.mu.Lock()
	s.rejected = append(s.rejected, err)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant", "error_description": err.Error()})
}

// checkAssertion verifies the JWT as Google's token endpoint does.
func (s *Server) checkAssertion(jwt string) error {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return errors.New("not a JWT")
	}
	var head struct{ Alg, Typ, Kid string }
	if err := decodeJSON(parts[0], &head); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if head.Alg != "RS256" || head.Kid != PrivateKeyID {
		return fmt.Errorf("header alg %q kid %q, want RS256 and %q", head.Alg, head.Kid, PrivateKeyID)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&s.Key.PublicKey, crypto.SHA256, digest[:], sig); err != nil {
		return fmt.Errorf("signature does not verify with the account's key: %w", err)
	}
	var c struct {
		Iss, Scope, Aud string
		Iat, Exp        int64
	}
	if err := decodeJSON(parts[1], &c); err != nil {
		return fmt.Errorf("claims: %w", err)
	}
	if c.Iss != ClientEmail {
		return fmt.Errorf("iss %q, want %q", c.Iss, ClientEmail)
	}
	if c.Aud != s.URL+"/token" {
		return fmt.Errorf("aud %q, want the token URI %q", c.Aud, s.URL+"/token")
	}
	if !containsWord(c.Scope, Scope) {
		return fmt.Errorf("scope %q lacks %s", c.Scope, Scope)
	}
	now := time.Now()
	iat, exp := time.Unix(c.Iat, 0), time.Unix(c.Exp, 0)
	if !exp.After(now) || exp.Sub(iat) > time.Hour || iat.After(now.Add(time.Minute)) {
		return fmt.Errorf("iat %s exp %s: want exp in the future, at most an hour after iat", iat.UTC(), exp.UTC())
	}
	return nil
}

func containsWord(list, word string) bool {
	for _, w := range strings.Fields(list) {
		if w == word {
			return true
		}
	}
	return false
}

func decodeJSON(part string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

type sendBody struct {
	Message struct {
		Token        string `json:"token"`
		Notification *struct {
			Title string `json:"title"`
			Body  string `json:"body"`
		} `json:"notification"`
		Data    map[string]string `json:"data"`
		Android struct {
			TTL string `json:"ttl"`
		} `json:"android"`
	} `json:"message"`
}

func (s *Server) serveSend(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.sends++
	slow := s.slow
	s.mu.Unlock()
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		return
	}
	done := s.crowd.Hold(r)
	defer done()
	if slow > 0 {
		timer := time.NewTimer(slow)
		select {
		case <-timer.C:
		case <-r.Context().Done():
			timer.Stop()
			return
		}
	}
	access, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	exp, issued := s.issued[access]
	s.mu.Unlock()
	if !ok || !issued || !time.Now().Before(exp) {
		// Not a rejection: a revoked or expired token is the client's to
		// refresh, which the tests exercise on purpose.
		writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "",
			"Request had invalid authentication credentials. Expected OAuth 2 access token.")
		return
	}
	var m sendBody
	if err := json.Unmarshal(body, &m); err != nil {
		s.reject(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Errorf("body: %w", err))
		return
	}
	if m.Message.Token == "" || m.Message.Notification == nil || m.Message.Notification.Title == "" {
		s.reject(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Errorf("message without token or notification title: %s", body))
		return
	}
	if ttl := m.Message.Android.TTL; ttl != "" {
		if secs, ok := strings.CutSuffix(ttl, "s"); !ok || !isUint(secs) {
			s.reject(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Errorf("android.ttl %q: want seconds with an s", ttl))
			return
		}
	}
	if payloadSize(m) > MaxPayload {
		// Not a rejection: FCM answers a message too large so (with no
		// FcmError detail), and the client is to avoid it.
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "", "Request contains an invalid argument.")
		return
	}
	token := m.Message.Token
	s.mu.Lock()
	unavailable := s.unavailable > 0
	if unavailable {
		s.unavailable--
	}
	retryAfter, gone := s.retryAfter, s.unregistered[token]
	a, answered := s.answers[token]
	s.mu.Unlock()
	switch {
	case unavailable:
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "UNAVAILABLE", "The service is currently unavailable.")
		return
	case gone:
		writeError(w, http.StatusNotFound, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found.")
		return
	case answered:
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		writeError(w, a.status, rpcStatus(a.status), a.errorCode, a.message)
		return
	}
	msg := Message{Token: token, Title: m.Message.Notification.Title, Body: m.Message.Notification.Body,
		URL: m.Message.Data["url"], TTL: m.Message.Android.TTL, AccessToken: access}
	s.mu.Lock()
	s.received = append(s.received, msg)
	n := len(s.received)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{ // a write error is the client's going away
		"name": "projects/" + ProjectID + "/messages/" + strconv.Itoa(n)})
}

// MaxPayload is what FCM takes of a message's notification and data
// together.
const MaxPayload = 4000

// payloadSize counts a message's notification and data as FCM does: the
// bytes of their text, keys and values.
func payloadSize(m sendBody) int {
	n := len(m.Message.Notification.Title) + len(m.Message.Notification.Body)
	for k, v := range m.Message.Data {
		n += len(k) + len(v)
	}
	return n
}

func isUint(s string) bool {
	_, err := strconv.ParseUint(s, 10, 63)
	return err == nil
}

// rpcStatus is the google.rpc status FCM gives with an HTTP status.
func rpcStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "ABORTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// writeError answers FCM v1's error JSON, with an FcmError detail when
// errorCode is set.
func writeError(w http.ResponseWriter, status int, rpcStatus, errorCode, message string) {
	e := map[string]any{"code": status, "message": message, "status": rpcStatus}
	if errorCode != "" {
		e["details"] = []map[string]string{{
			"@type":     "type.googleapis.com/google.firebase.fcm.v1.FcmError",
			"errorCode": errorCode,
		}}
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": e}) // a write error is the client's going away
}
