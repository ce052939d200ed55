package sms_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/sms"
	"github.com/newsletter/newsletter/channels/sms/smstest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
)

const (
	reader = "+447400123456"
	sender = "+15005550006"
)

func clientFor(f *smstest.Server) *sms.Client {
	return &sms.Client{BaseURL: f.URL, AccountSID: f.AccountSID, AuthToken: f.AuthToken, From: sender}
}

func TestSendFromNumber(t *testing.T) {
	f := smstest.New(t)
	sid, err := clientFor(f).Send(context.Background(), reader, "Your digest: 3 new posts {café} 😀")
	if err != nil {
		t.Fatal(err)
	}
	got := f.WaitFor(t, 1)
	m := got[0]
	if len(got) != 1 || m.SID != sid || !strings.HasPrefix(sid, "SM") || m.To != reader || m.From != sender ||
		m.MessagingServiceSID != "" || m.Body != "Your digest: 3 new posts {café} 😀" {
		t.Errorf("sent sid %q; the fake took %+v", sid, got)
	}
}

func TestSendThroughMessagingService(t *testing.T) {
	f := smstest.New(t)
	c := clientFor(f)
	c.From = "MG0123456789abcdef0123456789abcdef"
	c.BaseURL += "/" // a trailing slash in the setting is no second one in the path
	if _, err := c.Send(context.Background(), reader, "hi"); err != nil {
		t.Fatal(err)
	}
	if m := f.Messages(); len(m) != 1 || m[0].MessagingServiceSID != c.From || m[0].From != "" {
		t.Errorf("the fake took %+v, want the messaging service and no From", m)
	}
}

func TestSendBadCredentials(t *testing.T) {
	f := smstest.New(t)
	c := clientFor(f)
	c.AuthToken = "wrong"
	_, err := c.Send(context.Background(), reader, "hi")
	var se *sms.StatusError
	if !errors.As(err, &se) || se.Status != 401 || se.Code != 20003 || se.Message != "Authenticate" {
		t.Fatalf("wrong token: %v, want a 401 StatusError with code 20003", err)
	}
	if !errors.Is(err, sms.ErrRefused) || !sms.Permanent(err) || sms.Retire(err) {
		t.Errorf("wrong token: %v should be refused and permanent, and not retire the number", err)
	}
	if len(f.Messages()) != 0 {
		t.Error("the fake took a message with a wrong token")
	}
}

// TestSendPermanentCodes: the codes that are the number's fault retire it;
// those that are the account's or the sender's do not.
func TestSendPermanentCodes(t *testing.T) {
	f := smstest.New(t)
	c := clientFor(f)
	for i, tc := range []struct {
		code   int
		retire bool
	}{
		{21211, true}, {21214, true}, {21268, true}, {21610, true}, {21614, true},
		{21408, false}, {21612, false},
	} {
		to := fmt.Sprintf("+4474001234%02d", i)
		f.Permanent(to, tc.code)
		_, err := c.Send(context.Background(), to, "hi")
		var se *sms.StatusError
		if !errors.As(err, &se) || se.Status != 400 || se.Code != tc.code {
			t.Errorf("code %d: got %v", tc.code, err)
			continue
		}
		if !sms.Permanent(err) || sms.Retire(err) != tc.retire || errors.Is(err, sms.ErrNumberGone) != tc.retire ||
			errors.Is(err, sms.ErrRefused) == tc.retire || sms.RetryAfter(err) != 0 {
			t.Errorf("code %d: %v; want permanent, retire %v", tc.code, err, tc.retire)
		}
	}
	if _, err := c.Send(context.Background(), reader, "hi"); err != nil {
		t.Errorf("another number is still served: %v", err)
	}
	if n := len(f.Messages()); n != 1 {
		t.Errorf("the fake took %d messages, want the one to a working number", n)
	}
}

func TestSendRefusedForm(t *testing.T) {
	f := smstest.New(t)
	c := clientFor(f)
	for _, tc := range []struct {
		to, body string
		code     int
		class    error
	}{
		{"07400123456", "hi", 21211, sms.ErrNumberGone}, // not E.164
		{"", "hi", 21604, sms.ErrRefused},
		{reader, " ", 21602, sms.ErrRefused},
		{reader, strings.Repeat("a", 1601), 21617, sms.ErrRefused},
	} {
		_, err := c.Send(context.Background(), tc.to, tc.body)
		var se *sms.StatusError
		if !errors.As(err, &se) || se.Code != tc.code || !errors.Is(err, tc.class) {
			t.Errorf("To %q, a body of %d: %v; want code %d, %v", tc.to, len(tc.body), err, tc.code, tc.class)
		}
	}
	if _, err := (&sms.Client{BaseURL: f.URL, AccountSID: f.AccountSID, AuthToken: f.AuthToken}).Send(
		context.Background(), reader, "hi"); !errors.Is(err, sms.ErrRefused) {
		t.Errorf("a client with no sender: %v, want ErrRefused before any request", err)
	}
	if n := f.Attempts(); n != 4 {
		t.Errorf("%d requests reached the fake, want 4 (none for the client without a sender)", n)
	}
}

func TestSendUnavailableRetryAfter(t *testing.T) {
	f := smstest.New(t)
	c := clientFor(f)
	future := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		status     int
		retryAfter string
		min, max   time.Duration
	}{
		{429, "7", 7 * time.Second, 7 * time.Second},
		{503, "", 0, 0},
		{500, "0", 0, 0},
		{502, "soon", 0, 0},
		{503, "99999999", sms.MaxRetryAfter, sms.MaxRetryAfter},
		// An HTTP date: about 90 s from now, less the time the test took.
		{503, future, 30 * time.Second, 90 * time.Second},
		{429, "Mon, 02 Jan 2006 15:04:05 GMT", 0, 0}, // past
	} {
		f.FailNext(1, tc.status, tc.retryAfter)
		_, err := c.Send(context.Background(), reader, "hi")
		var se *sms.StatusError
		if !errors.As(err, &se) || se.Status != tc.status || !errors.Is(err, sms.ErrUnavailable) || sms.Permanent(err) || sms.Retire(err) {
			t.Errorf("%d: %v, want ErrUnavailable, not permanent", tc.status, err)
			continue
		}
		if d := sms.RetryAfter(err); d < tc.min || d > tc.max {
			t.Errorf("%d with Retry-After %q: RetryAfter %s, want %s to %s", tc.status, tc.retryAfter, d, tc.min, tc.max)
		}
	}
	if _, err := c.Send(context.Background(), reader, "hi"); err != nil {
		t.Errorf("after the failures: %v", err)
	}
	if n := len(f.Messages()); n != 1 {
		t.Errorf("the fake took %d messages, want only the one after the failures", n)
	}
}

// TestSendHang: a hung gateway holds the request until the client gives
// up; that is no class of refusal (retry), and nothing is taken. After
// Release the gateway serves again.
func TestSendHang(t *testing.T) {
	f := smstest.New(t)
	c := clientFor(f)
	f.Hang()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Send(ctx, reader, "held")
		done <- err
	}()
	poll.True(t, poll.BusyMachine, "the request to reach the hung fake", func() bool { return f.Attempts() == 1 })
	select {
	case err := <-done:
		t.Fatalf("Send returned while the fake hung: %v", err)
	default:
	}
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || sms.Permanent(err) || sms.Retire(err) || sms.RetryAfter(err) != 0 {
		t.Errorf("a given-up request: %v, want context.Canceled, to be retried", err)
	}
	var se *sms.StatusError
	if errors.As(err, &se) {
		t.Errorf("a given-up request is no gateway answer: %v", se)
	}
	f.Release()
	if _, err := c.Send(context.Background(), reader, "after"); err != nil {
		t.Fatal(err)
	}
	if m := f.Messages(); len(m) != 1 || m[0].Body != "after" {
		t.Errorf("the fake took %+v, want only the message sent after Release", m)
	}
}

// TestSendHeldThenReleased: a request still waiting when the fake is
// released is answered 503 (retry), not taken.
func TestSendHeldThenReleased(t *testing.T) {
	f := smstest.New(t)
	f.Hang()
	done := make(chan error, 1)
	go func() {
		_, err := clientFor(f).Send(context.Background(), reader, "held")
		done <- err
	}()
	poll.True(t, poll.BusyMachine, "the request to reach the hung fake", func() bool { return f.Attempts() == 1 })
	f.Release()
	if err := <-done; !errors.Is(err, sms.ErrUnavailable) {
		t.Errorf("a held request after Release: %v, want ErrUnavailable", err)
	}
	if n := len(f.Messages()); n != 0 {
		t.Errorf("the fake took %d held messages", n)
	}
}

func TestSendConcurrent(t *testing.T) {
	f := smstest.New(t)
	c := clientFor(f)
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if _, err := c.Send(context.Background(), fmt.Sprintf("+4474001230%02d", i), "hi"); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	seen := map[string]bool{}
	for _, m := range f.WaitFor(t, n) {
		if seen[m.SID] || seen[m.To] {
			t.Errorf("a SID or a number twice: %+v", m)
		}
		seen[m.SID], seen[m.To] = true, true
	}
}

// TestSendOtherAnswers: what a proxy or a broken gateway may answer.
func TestSendOtherAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.URL.Path, "/ACproxy/"):
			http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
		case strings.Contains(r.URL.Path, "/ACmoved/"):
			http.Redirect(w, r, "https://elsewhere.example/", http.StatusFound)
		case strings.Contains(r.URL.Path, "/ACnosid/"):
			w.WriteHeader(http.StatusCreated)
		}
	}))
	defer srv.Close()
	send := func(account string) (string, error) {
		c := &sms.Client{BaseURL: srv.URL, AccountSID: account, AuthToken: "t", From: sender}
		return c.Send(context.Background(), reader, "hi")
	}
	_, err := send("ACproxy")
	var se *sms.StatusError
	if !errors.As(err, &se) || se.Code != 0 || !strings.Contains(se.Message, "bad gateway") || !errors.Is(err, sms.ErrUnavailable) {
		t.Errorf("an HTML 502: %v, want ErrUnavailable with the body as message", err)
	}
	if _, err := send("ACmoved"); !errors.As(err, &se) || se.Status != http.StatusFound || !errors.Is(err, sms.ErrRefused) {
		t.Errorf("a redirect: %v, want it answered, not followed, and refused", err)
	}
	if sid, err := send("ACnosid"); err != nil || sid != "" {
		t.Errorf("a 201 with no JSON: %q, %v; want taken, without a SID", sid, err)
	}
	srv.Close()
	_, err = send("ACproxy")
	if err == nil || errors.As(err, &se) || sms.Permanent(err) {
		t.Errorf("a closed server: %v, want a network error, to be retried", err)
	}
}

// TestSignedInbound: the fake signs as Twilio does and the package
// validates it, two implementations agreeing over real HTTP.
func TestSignedInbound(t *testing.T) {
	f := smstest.New(t)
	got := make(chan bool, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Error(err)
		}
		full := "http://" + r.Host + r.URL.RequestURI()
		got <- sms.ValidSignature(f.AuthToken, full, r.PostForm, r.Header.Get(sms.SignatureHeader)) &&
			sms.Keyword(r.PostForm.Get("Body")) == sms.OptOut
	}))
	defer hook.Close()
	form := url.Values{"From": {reader}, "To": {sender}, "Body": {" stop "}, "MessageSid": {"SM1"},
		"AccountSid": {f.AccountSID}, "MediaUrl0": {"b", "a", "b"}}
	for _, u := range []string{hook.URL + "/feedback/sms", hook.URL + "/feedback/sms?tenant=a&x=%20y"} {
		resp, err := http.DefaultClient.Do(f.SignedInbound(u, form))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if !<-got {
			t.Errorf("%s: the fake's signed STOP does not validate", u)
		}
	}
	req := f.SignedInbound(hook.URL+"/feedback/sms", form)
	req.Header.Set(sms.SignatureHeader, smstest.Signature("another token", hook.URL+"/feedback/sms", form))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if <-got {
		t.Error("a callback signed with another token validates")
	}
}

// TestStatusCallbacks: a text sent with StatusCallback gets its statuses
// posted there as Twilio posts them (a url-encoded form: MessageSid,
// MessageStatus sent then undelivered with ErrorCode, To, From,
// AccountSid, no Body), signed so that the package validates them; a text
// without one gets none.
func TestStatusCallbacks(t *testing.T) {
	f := smstest.New(t)
	f.Undelivered(reader, 30006)
	var mu sync.Mutex
	var forms []url.Values
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Error(err)
		}
		full := "http://" + r.Host + r.URL.RequestURI()
		if ct := r.Header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" ||
			!sms.ValidSignature(f.AuthToken, full, r.PostForm, r.Header.Get(sms.SignatureHeader)) {
			t.Errorf("a status callback of type %q not validly signed over %s", ct, full)
		}
		mu.Lock()
		forms = append(forms, r.PostForm)
		mu.Unlock()
	}))
	defer hook.Close()
	c := clientFor(f)
	c.StatusCallback = hook.URL + "/feedback/sms?tenant=a"
	sid, err := c.Send(context.Background(), reader, "hi")
	if err != nil {
		t.Fatal(err)
	}
	if m := f.WaitFor(t, 1); m[0].StatusCallback != c.StatusCallback {
		t.Fatalf("the message's StatusCallback %q", m[0].StatusCallback)
	}
	f.WaitCallbacks(t, 2)
	mu.Lock()
	defer mu.Unlock()
	for i, want := range []string{"sent", "undelivered"} {
		form := forms[i]
		if form.Get("MessageSid") != sid || form.Get("MessageStatus") != want || form.Get("To") != reader || form.Get("From") != sender ||
			form.Get("AccountSid") != f.AccountSID || form.Has("Body") {
			t.Errorf("callback %d: %v", i, form)
		}
	}
	if code := forms[1].Get("ErrorCode"); code != "30006" || forms[0].Has("ErrorCode") {
		t.Errorf("ErrorCode %q on undelivered, %q on sent", code, forms[0].Get("ErrorCode"))
	}
	if !sms.RetireStatus(forms[1].Get("MessageStatus"), forms[1].Get("ErrorCode")) {
		t.Error("a landline's status does not retire the number")
	}
	c.StatusCallback = ""
	if _, err := c.Send(context.Background(), "+447400123457", "hi"); err != nil {
		t.Fatal(err)
	}
	if m := f.WaitFor(t, 2); m[1].StatusCallback != "" || len(f.Callbacks()) != 2 {
		t.Errorf("a text without StatusCallback: %+v, %d callbacks", m[1], len(f.Callbacks()))
	}
}
