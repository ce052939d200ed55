// Package apnstest is the Apple Push Notification service for tests: an
// httptest.Server over TLS that speaks HTTP/2 only, with a team's auth
// key of its own (written as a .p8 file). Every request must come over
// HTTP/2 and carry a provider token that verifies (ES256 under the key,
// kid the key's id, iss the team, iat under an hour old by the server's
// clock), the app's topic and an alert push type. It answers as APNs
// does: apns-id on every answer (the request's, or a fresh UUID), JSON
// {"reason"} errors, 413 PayloadTooLarge past 4096 bytes, 405 for a
// method other than POST, and 429 TooManyProviderTokenUpdates for a new
// provider token on a connection within 20 minutes of its last. As APNs
// allows one stream on a new connection until a request with a valid
// provider token has come, a second request in flight on a connection
// before then is rejected. It records what it takes, counts connections
// and the most requests in flight at once, and can be made slow,
// answer 503 (with Retry-After), or say a device token is unregistered.
//
// The JWT check is written here from RFC 7515 and 7518, sharing no code
// with package apns.
package apnstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
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

// The team, key and app New makes.
const (
	KeyID  = "ABC123DEFG"
	TeamID = "DEF123GHIJ"
	Topic  = "com.example.newsletter"
)

// TokenUpdateEvery is how seldom a connection may bring a new provider
// token: a newer one within it is answered 429 TooManyProviderTokenUpdates.
const TokenUpdateEvery = 20 * time.Minute

// MaxPayload is the largest payload APNs takes for an alert; a larger
// one is answered 413 PayloadTooLarge.
const MaxPayload = 4096

// Message is one notification the server took.
type Message struct {
	DeviceToken string
	Title       string
	Body        string
	URL         string
	// The headers as sent.
	Topic      string
	PushType   string
	Priority   string
	Expiration string
	// ProviderToken is the JWT it came with.
	ProviderToken string
}

// Server is the test APNs.
type Server struct {
	// URL is the server's origin, https://127.0.0.1:port.
	URL string
	// KeyFile is the team's .p8 auth key.
	KeyFile string
	// Key is the team's key.
	Key *ecdsa.PrivateKey

	srv   *httptest.Server
	crowd crowd.Crowd // requests in flight, held, and the connections

	mu           sync.Mutex
	now          func() time.Time
	requests     int
	connStreams  map[string]int  // by connection: requests in flight
	connTaken    map[string]bool // by connection: a provider token verified
	received     []Message
	rejected     []error
	expectBad    bool
	tokens       map[string]bool      // provider tokens taken
	tokenSwaps   map[string]time.Time // by connection: when its last new provider token came
	tooOften     int                  // TooManyProviderTokenUpdates answered
	expired      map[string]bool      // provider tokens to answer ExpiredProviderToken
	slow         time.Duration
	unavailable  int
	retryAfter   string
	unregistered map[string]time.Time
	answers      map[string]answer
}

type answer struct {
	status int
	reason string
}

// New starts the server and writes the key into t.TempDir. It stops when
// the test ends, and the test fails then if a request was rejected as
// malformed, unless ExpectRejections was called.
func New(t testing.TB) *Server {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("apnstest: key: %v", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("apnstest: PKCS#8: %v", err)
	}
	s := &Server{Key: key, now: time.Now, tokens: map[string]bool{}, expired: map[string]bool{}, tokenSwaps: map[string]time.Time{},
		connStreams: map[string]int{}, connTaken: map[string]bool{}, unregistered: map[string]time.Time{}, answers: map[string]answer{}}
	s.KeyFile = filepath.Join(t.TempDir(), "AuthKey_"+KeyID+".p8")
	if err := os.WriteFile(s.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.EnableHTTP2 = true
	s.crowd.CountConnections(s.srv.Config)
	s.srv.StartTLS()
	s.URL = s.srv.URL
	t.Cleanup(func() {
		s.Release()
		s.srv.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.expectBad {
			for _, err := range s.rejected {
				t.Errorf("apnstest rejected a request: %v", err)
			}
		}
	})
	return s
}

// RootCAs trusts the server's certificate (for apns.NewHTTPClient).
func (s *Server) RootCAs() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(s.srv.Certificate())
	return pool
}

// CertPEM is the server's certificate in PEM: for a service that reads
// the certificates it trusts from a file (NEWSLETTER_PUSH_CA_FILE).
func (s *Server) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
}

// Client is an HTTP/2 client that trusts the server (httptest's own).
func (s *Server) Client() *http.Client { return s.srv.Client() }

// SetClock makes the server judge a provider token's age by now.
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	s.now = now
	s.mu.Unlock()
}

// Slow makes every later request wait d before it is answered (or until
// its client gives up).
func (s *Server) Slow(d time.Duration) {
	s.mu.Lock()
	s.slow = d
	s.mu.Unlock()
}

// HoldUntil makes requests wait, unanswered, until n of them are in
// flight at once: a client that does not send them concurrently never
// gets an answer.
func (s *Server) HoldUntil(n int) { s.crowd.HoldUntil(n) }

// Release answers the requests HoldUntil holds, and holds no more.
func (s *Server) Release() { s.crowd.Release() }

// Unavailable answers the next n requests 503 ServiceUnavailable, with a
// Retry-After header when retryAfter is not empty.
func (s *Server) Unavailable(n int, retryAfter string) {
	s.mu.Lock()
	s.unavailable, s.retryAfter = n, retryAfter
	s.mu.Unlock()
}

// Unregistered makes every request to deviceToken answer 410
// Unregistered, with the timestamp of the server's clock now.
func (s *Server) Unregistered(deviceToken string) {
	s.mu.Lock()
	s.unregistered[deviceToken] = s.now()
	s.mu.Unlock()
}

// Answer makes every request to deviceToken answer status with reason.
func (s *Server) Answer(deviceToken string, status int, reason string) {
	s.mu.Lock()
	s.answers[deviceToken] = answer{status, reason}
	s.mu.Unlock()
}

// ExpireProviderTokens answers 403 ExpiredProviderToken to every provider
// token seen so far, as APNs does when its clock is ahead of ours.
func (s *Server) ExpireProviderTokens() {
	s.mu.Lock()
	for tok := range s.tokens {
		s.expired[tok] = true
	}
	s.mu.Unlock()
}

// ExpectRejections keeps rejected requests from failing the test.
func (s *Server) ExpectRejections() {
	s.mu.Lock()
	s.expectBad = true
	s.mu.Unlock()
}

// Received lists the notifications taken, in order.
func (s *Server) Received() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.received...)
}

// Rejected lists why requests were refused as malformed.
func (s *Server) Rejected() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.rejected...)
}

// Connections counts the connections clients opened.
func (s *Server) Connections() int { return s.crowd.Connections() }

// Requests counts the requests, whatever their answer.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// MaxInFlight is the most requests the server had in flight at once.
func (s *Server) MaxInFlight() int { return s.crowd.MaxInFlight() }

// TooManyUpdates counts the 429 TooManyProviderTokenUpdates answered.
func (s *Server) TooManyUpdates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tooOften
}

// ProviderTokens counts the distinct provider tokens that verified.
func (s *Server) ProviderTokens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tokens)
}

// WaitFor waits until n notifications have been taken.
func (s *Server) WaitFor(t testing.TB, n int) []Message {
	t.Helper()
	poll.Until(t, poll.BusyMachine, func() error {
		if got := len(s.Received()); got < n {
			return fmt.Errorf("apnstest took %d notifications, waiting for %d", got, n)
		}
		return nil
	})
	return s.Received()
}

func writeReason(w http.ResponseWriter, status int, reason string, timestamp time.Time) {
	body := map[string]any{"reason": reason}
	if !timestamp.IsZero() {
		body["timestamp"] = timestamp.UnixMilli()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body) // a write error is the client's going away
}

func (s *Server) reject(w http.ResponseWriter, status int, reason string, err error) {
	s.mu.Lock()
	s.rejected = append(s.rejected, err)
	s.mu.Unlock()
	writeReason(w, status, reason, time.Time{})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	// Every answer carries apns-id: the request's own, or one APNs makes.
	id := r.Header.Get("Apns-Id")
	if id == "" {
		id = newUUID()
	}
	w.Header().Set("Apns-Id", id)
	s.mu.Lock()
	s.requests++
	slow := s.slow
	s.connStreams[r.RemoteAddr]++
	early := s.connStreams[r.RemoteAddr] > 1 && !s.connTaken[r.RemoteAddr]
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.connStreams[r.RemoteAddr]--
		s.mu.Unlock()
	}()
	if early {
		// APNs advertises one stream until a valid provider token has
		// come on the connection; a client that sends a second one
		// then has not waited for the first answer.
		s.reject(w, http.StatusBadRequest, "TooManyRequests", errors.New("a second stream on a connection before a request with a valid provider token"))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8192))
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
	if r.ProtoMajor != 2 {
		s.reject(w, http.StatusBadRequest, "BadPath", fmt.Errorf("%s: APNs speaks HTTP/2 only", r.Proto))
		return
	}
	device, ok := strings.CutPrefix(r.URL.Path, "/3/device/")
	if r.Method != http.MethodPost && ok {
		s.reject(w, http.StatusMethodNotAllowed, "MethodNotAllowed", fmt.Errorf("%s %s", r.Method, r.URL.Path))
		return
	}
	if !ok {
		s.reject(w, http.StatusNotFound, "BadPath", fmt.Errorf("%s %s", r.Method, r.URL.Path))
		return
	}
	if _, err := hex.DecodeString(device); err != nil || len(device) < 64 {
		s.reject(w, http.StatusBadRequest, "BadDeviceToken", fmt.Errorf("device token %q", device))
		return
	}
	jwt, ok := strings.CutPrefix(r.Header.Get("Authorization"), "bearer ")
	if !ok {
		s.reject(w, http.StatusForbidden, "MissingProviderToken", errors.New("no bearer provider token"))
		return
	}
	if status, reason, err := s.checkToken(jwt, r.RemoteAddr); err != nil {
		s.reject(w, status, reason, err)
		return
	} else if status != 0 {
		writeReason(w, status, reason, time.Time{})
		return
	}
	if len(body) > MaxPayload {
		// Not a rejection: a payload too large is the client's to avoid,
		// and APNs answers it so.
		writeReason(w, http.StatusRequestEntityTooLarge, "PayloadTooLarge", time.Time{})
		return
	}
	m, err := s.checkRequest(r, device, body)
	if err != nil {
		s.reject(w, http.StatusBadRequest, "BadTopic", err)
		return
	}
	m.ProviderToken = jwt
	s.mu.Lock()
	unavailable := s.unavailable > 0
	if unavailable {
		s.unavailable--
	}
	retryAfter := s.retryAfter
	goneAt, gone := s.unregistered[device]
	a, answered := s.answers[device]
	s.mu.Unlock()
	switch {
	case unavailable:
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		writeReason(w, http.StatusServiceUnavailable, "ServiceUnavailable", time.Time{})
		return
	case gone:
		writeReason(w, http.StatusGone, "Unregistered", goneAt)
		return
	case answered:
		writeReason(w, a.status, a.reason, time.Time{})
		return
	}
	s.mu.Lock()
	s.received = append(s.received, m)
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// checkToken verifies a provider token: an error is a malformed or
// forged one (a rejection), a status without error is APNs' answer to a
// good token it will not take (expired).
func (s *Server) checkToken(jwt, conn string) (int, string, error) {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return http.StatusForbidden, "InvalidProviderToken", errors.New("provider token is not a JWT")
	}
	var head struct{ Alg, Kid string }
	if err := decodeJSON(parts[0], &head); err != nil || head.Alg != "ES256" || head.Kid != KeyID {
		return http.StatusForbidden, "InvalidProviderToken", fmt.Errorf("JWT header %+v (%v): want ES256 and kid %s", head, err, KeyID)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return http.StatusForbidden, "InvalidProviderToken", errors.New("JWT signature: want 64 bytes of r and s")
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(&s.Key.PublicKey, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return http.StatusForbidden, "InvalidProviderToken", errors.New("JWT signature does not verify with the team's key")
	}
	var claims struct {
		Iss string
		Iat int64
	}
	if err := decodeJSON(parts[1], &claims); err != nil || claims.Iss != TeamID {
		return http.StatusForbidden, "InvalidProviderToken", fmt.Errorf("JWT claims %+v (%v): want iss %s", claims, err, TeamID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now, iat := s.now(), time.Unix(claims.Iat, 0)
	if iat.After(now.Add(time.Minute)) {
		return http.StatusForbidden, "InvalidProviderToken", fmt.Errorf("iat %s is in the future (now %s)", iat.UTC(), now.UTC())
	}
	if now.Sub(iat) > time.Hour || s.expired[jwt] {
		return http.StatusForbidden, "ExpiredProviderToken", nil
	}
	if !s.tokens[jwt] {
		// A new token on a connection less than 20 minutes after its
		// last: Apple refuses updates that often.
		if last, ok := s.tokenSwaps[conn]; ok && now.Sub(last) < TokenUpdateEvery {
			s.tooOften++
			return http.StatusTooManyRequests, "TooManyProviderTokenUpdates", nil
		}
		s.tokenSwaps[conn] = now
	}
	s.tokens[jwt] = true
	s.connTaken[conn] = true
	return 0, "", nil
}

func (s *Server) checkRequest(r *http.Request, device string, body []byte) (Message, error) {
	m := Message{DeviceToken: device, Topic: r.Header.Get("Apns-Topic"), PushType: r.Header.Get("Apns-Push-Type"),
		Priority: r.Header.Get("Apns-Priority"), Expiration: r.Header.Get("Apns-Expiration")}
	if m.Topic != Topic {
		return m, fmt.Errorf("apns-topic %q, want %q", m.Topic, Topic)
	}
	if m.PushType != "alert" {
		return m, fmt.Errorf("apns-push-type %q, want alert", m.PushType)
	}
	if m.Priority != "10" && m.Priority != "5" && m.Priority != "1" {
		return m, fmt.Errorf("apns-priority %q", m.Priority)
	}
	if _, err := strconv.ParseInt(m.Expiration, 10, 64); m.Expiration != "" && err != nil {
		return m, fmt.Errorf("apns-expiration %q: want a UNIX time", m.Expiration)
	}
	var p struct {
		APS struct {
			Alert struct{ Title, Body string } `json:"alert"`
		} `json:"aps"`
		URL string `json:"url"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.APS.Alert.Title == "" {
		return m, fmt.Errorf("payload %s (%v): want aps.alert.title", body, err)
	}
	m.Title, m.Body, m.URL = p.APS.Alert.Title, p.APS.Alert.Body, p.URL
	return m, nil
}

// newUUID is a random (version 4) UUID, as APNs makes for apns-id.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func decodeJSON(part string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
