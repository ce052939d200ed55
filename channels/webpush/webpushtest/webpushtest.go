// Package webpushtest is a push service for tests (an httptest.Server): it
// hands out subscriptions whose browser keys it keeps, checks the VAPID
// JWT of every message (ES256 under the operator's public key, aud its own
// origin, exp in the future and at most 24 hours ahead, a mailto: or https:
// sub) and decrypts every payload with the browser's private key, so a test
// that sees a message here has proven the encryption real. It can be told
// to answer an error (404, 410, 429, 503, with Retry-After) or to take
// connections and never answer.
//
// The decryption and the JWT check are written here from RFC 8291, RFC
// 8188 and RFC 8292, sharing no code with package push.
package webpushtest

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/webpush"
)

// Message is one message the service took: decrypted, its headers read.
type Message struct {
	Endpoint  string
	Plaintext []byte
	TTL       int
	Urgency   string
	Topic     string
	// Subject is the JWT's sub.
	Subject string
}

// Notification decodes the plaintext as the service worker would.
func (m Message) Notification() (webpush.Notification, error) {
	var n webpush.Notification
	err := json.Unmarshal(m.Plaintext, &n)
	return n, err
}

// Server is the test push service.
type Server struct {
	// URL is the service's origin, http://127.0.0.1:port.
	URL string

	srv   *httptest.Server
	vapid []byte // the operator's public key, uncompressed
	now   func() time.Time

	mu        sync.Mutex
	browsers  map[string]*ecdh.PrivateKey // by endpoint
	auth      map[string][]byte
	received  []Message
	rejected  []error
	attempts  int
	answer    answer
	answerFor map[string]answer
	hang      chan struct{} // non-nil while hanging; closed to recover
	expectBad bool
}

type answer struct {
	status     int
	retryAfter string
}

// New starts a push service that accepts messages signed with the VAPID
// key vapidPublic (base64url, as NEWSLETTER_VAPID_PUBLIC_KEY). It stops
// when the test ends, and the test fails then if any message was rejected
// (a bad JWT, a payload that does not decrypt), unless ExpectRejections was
// called.
func New(t testing.TB, vapidPublic string) *Server {
	t.Helper()
	key, err := base64.RawURLEncoding.DecodeString(vapidPublic)
	if err != nil {
		t.Fatalf("pushtest: VAPID public key: %v", err)
	}
	s := &Server{vapid: key, now: time.Now, browsers: map[string]*ecdh.PrivateKey{},
		auth: map[string][]byte{}, answerFor: map[string]answer{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(func() {
		s.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.expectBad {
			for _, err := range s.rejected {
				t.Errorf("pushtest rejected a message: %v", err)
			}
		}
	})
	return s
}

// Close releases any held request and stops the service.
func (s *Server) Close() {
	s.Recover()
	s.srv.Close()
}

// NewSubscription makes a browser: a key pair and secret this service
// keeps, and an endpoint on it.
func (s *Server) NewSubscription() webpush.Subscription {
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		panic(err) // the system's randomness failed: nothing to test
	}
	var id [12]byte
	auth := make([]byte, 16)
	if _, err := rand.Read(id[:]); err != nil {
		panic(err)
	}
	if _, err := rand.Read(auth); err != nil {
		panic(err)
	}
	endpoint := s.URL + "/push/" + hex.EncodeToString(id[:])
	s.mu.Lock()
	s.browsers[endpoint] = key
	s.auth[endpoint] = auth
	s.mu.Unlock()
	return webpush.Subscription{Endpoint: endpoint, P256DH: key.PublicKey().Bytes(), Auth: auth}
}

// Answer makes every later message get status (0: the normal 201), with
// a Retry-After header when retryAfter is not empty.
func (s *Server) Answer(status int, retryAfter string) {
	s.mu.Lock()
	s.answer = answer{status, retryAfter}
	s.mu.Unlock()
}

// AnswerFor is Answer for one endpoint only (it wins over Answer).
func (s *Server) AnswerFor(endpoint string, status int, retryAfter string) {
	s.mu.Lock()
	s.answerFor[endpoint] = answer{status, retryAfter}
	s.mu.Unlock()
}

// Hang makes the service take connections and requests and never answer,
// until Recover (or the client gives up).
func (s *Server) Hang() {
	s.mu.Lock()
	if s.hang == nil {
		s.hang = make(chan struct{})
	}
	s.mu.Unlock()
}

// Recover ends Hang: held requests are answered 503 and not taken; new
// ones are served as usual.
func (s *Server) Recover() {
	s.mu.Lock()
	if s.hang != nil {
		close(s.hang)
		s.hang = nil
	}
	s.mu.Unlock()
}

// ExpectRejections keeps rejected messages from failing the test (for a
// test that sends a bad one on purpose).
func (s *Server) ExpectRejections() {
	s.mu.Lock()
	s.expectBad = true
	s.mu.Unlock()
}

// Received lists the messages taken (answered 201), in order.
func (s *Server) Received() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.received...)
}

// Rejected lists why messages were refused as invalid.
func (s *Server) Rejected() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.rejected...)
}

// Attempts counts the requests that reached the service, whatever their
// answer.
func (s *Server) Attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.attempts++
	hang := s.hang
	s.mu.Unlock()
	// The body is read first: only then does the server notice a client
	// that hangs up (and cancel the request's context).
	body, err := io.ReadAll(io.LimitReader(r.Body, 8192))
	if err != nil {
		return
	}
	if hang != nil {
		// Never answered while hanging. After Recover the held request is
		// dropped with a 503 (its client has most likely given up): a
		// message is taken only by a request that came while the service
		// was well, so a test can count deliveries exactly.
		select {
		case <-hang:
			http.Error(w, "held while the service hung", http.StatusServiceUnavailable)
		case <-r.Context().Done():
		}
		return
	}
	endpoint := s.URL + r.URL.Path
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	s.mu.Lock()
	key, known := s.browsers[endpoint]
	auth := s.auth[endpoint]
	a, ok := s.answerFor[endpoint]
	if !ok {
		a = s.answer
	}
	s.mu.Unlock()
	if !known {
		http.Error(w, "no such subscription", http.StatusNotFound)
		return
	}
	msg, code, err := s.check(r, endpoint, body, key, auth)
	if err != nil {
		s.mu.Lock()
		s.rejected = append(s.rejected, fmt.Errorf("%s: %w", endpoint, err))
		s.mu.Unlock()
		http.Error(w, err.Error(), code)
		return
	}
	if a.status != 0 {
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		http.Error(w, http.StatusText(a.status), a.status)
		return
	}
	s.mu.Lock()
	s.received = append(s.received, msg)
	s.mu.Unlock()
	w.Header().Set("Location", endpoint+"/message")
	w.WriteHeader(http.StatusCreated)
}

// check verifies a request as a push service must and decrypts it,
// answering the status to refuse it with.
func (s *Server) check(r *http.Request, endpoint string, body []byte, key *ecdh.PrivateKey, auth []byte) (Message, int, error) {
	sub, err := s.checkVAPID(r.Header.Get("Authorization"))
	if err != nil {
		return Message{}, http.StatusUnauthorized, fmt.Errorf("VAPID: %w", err)
	}
	ttl, err := strconv.Atoi(r.Header.Get("TTL"))
	if err != nil || ttl < 0 {
		return Message{}, http.StatusBadRequest, fmt.Errorf("TTL header %q: want whole seconds", r.Header.Get("TTL"))
	}
	if ce := r.Header.Get("Content-Encoding"); ce != "aes128gcm" {
		return Message{}, http.StatusBadRequest, fmt.Errorf("Content-Encoding %q, want aes128gcm", ce)
	}
	if len(body) > 4096 {
		return Message{}, http.StatusRequestEntityTooLarge, fmt.Errorf("body of %d bytes, more than 4096", len(body))
	}
	plain, err := Decrypt(key, auth, body)
	if err != nil {
		return Message{}, http.StatusBadRequest, err
	}
	return Message{Endpoint: endpoint, Plaintext: plain, TTL: ttl, Urgency: r.Header.Get("Urgency"),
		Topic: r.Header.Get("Topic"), Subject: sub}, 0, nil
}

// checkVAPID verifies "vapid t=<JWT>, k=<key>" (RFC 8292 section 3) and
// answers the JWT's sub.
func (s *Server) checkVAPID(h string) (string, error) {
	scheme, params, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "vapid") {
		return "", fmt.Errorf("Authorization %q: want the vapid scheme", h)
	}
	var tok, k string
	for _, p := range strings.Split(params, ",") {
		name, val, _ := strings.Cut(strings.TrimSpace(p), "=")
		switch name {
		case "t":
			tok = val
		case "k":
			k = val
		}
	}
	kb, err := base64.RawURLEncoding.DecodeString(k)
	if err != nil || !hmac.Equal(kb, s.vapid) {
		return "", fmt.Errorf("k=%q is not the application server key the subscription was made for", k)
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), kb)
	if err != nil {
		return "", fmt.Errorf("k: %w", err)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", errors.New("t is not a JWT")
	}
	var head struct{ Alg, Typ string }
	if err := decodeJSON(parts[0], &head); err != nil || head.Alg != "ES256" {
		return "", fmt.Errorf("JWT header: want alg ES256, got %+v (%v)", head, err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return "", errors.New("JWT signature: want 64 bytes of r and s")
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(pub, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return "", errors.New("JWT signature does not verify")
	}
	var claims struct {
		Aud string `json:"aud"`
		Exp int64  `json:"exp"`
		Sub string `json:"sub"`
	}
	if err := decodeJSON(parts[1], &claims); err != nil {
		return "", fmt.Errorf("JWT claims: %w", err)
	}
	if claims.Aud != s.URL {
		return "", fmt.Errorf("aud %q, want this service's origin %q", claims.Aud, s.URL)
	}
	now := s.now()
	if exp := time.Unix(claims.Exp, 0); !exp.After(now) || exp.After(now.Add(24*time.Hour)) {
		return "", fmt.Errorf("exp %s: want within the next 24 hours", exp.UTC())
	}
	if !strings.HasPrefix(claims.Sub, "mailto:") && !strings.HasPrefix(claims.Sub, "https://") ||
		strings.HasPrefix(claims.Sub, "mailto:mailto:") {
		return "", fmt.Errorf("sub %q: want mailto: or https:", claims.Sub)
	}
	return claims.Sub, nil
}

func decodeJSON(part string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Decrypt reads an aes128gcm push message (RFC 8188, RFC 8291) as the
// browser with private key ua and auth secret auth does.
func Decrypt(ua *ecdh.PrivateKey, auth, body []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("body shorter than the aes128gcm header")
	}
	salt, rs, idlen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if rs < 18 || len(body) < 21+idlen {
		return nil, fmt.Errorf("header: record size %d, key id of %d bytes", rs, idlen)
	}
	asPub, err := ecdh.P256().NewPublicKey(body[21 : 21+idlen])
	if err != nil {
		return nil, fmt.Errorf("key id is not the sender's P-256 key: %w", err)
	}
	ciphertext := body[21+idlen:]
	if uint32(len(ciphertext)) > rs {
		return nil, fmt.Errorf("%d bytes of ciphertext in one record of at most %d", len(ciphertext), rs)
	}
	secret, err := ua.ECDH(asPub)
	if err != nil {
		return nil, err
	}
	// HKDF written out with HMAC (RFC 5869), as RFC 8291 section 3.4 and
	// RFC 8188 section 2.2 lay it out.
	mac := func(key []byte, parts ...[]byte) []byte {
		h := hmac.New(sha256.New, key)
		for _, p := range parts {
			h.Write(p)
		}
		return h.Sum(nil)
	}
	prkKey := mac(auth, secret)
	keyInfo := append(append([]byte("WebPush: info\x00"), ua.PublicKey().Bytes()...), asPub.Bytes()...)
	ikm := mac(prkKey, keyInfo, []byte{1})
	prk := mac(salt, ikm)
	cek := mac(prk, []byte("Content-Encoding: aes128gcm\x00"), []byte{1})[:16]
	nonce := mac(prk, []byte("Content-Encoding: nonce\x00"), []byte{1})[:12]
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	plain, err := gcm.Open(nil, nonce, ciphertext, nil)
	if err != nil {
		return nil, fmt.Errorf("payload does not decrypt with the browser's keys: %w", err)
	}
	// Padding: zeros after the delimiter, which is 2 in the last record.
	end := len(plain) - 1
	for end >= 0 && plain[end] == 0 {
		end--
	}
	if end < 0 || plain[end] != 2 {
		return nil, errors.New("no last-record delimiter (0x02) after the plaintext")
	}
	return plain[:end], nil
}
