package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/sms"
	"github.com/newsletter/newsletter/channels/sms/smstest"
	"github.com/newsletter/newsletter/internal/clientip"
	"github.com/newsletter/newsletter/internal/phone"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker"
)

// codeEnv is the preference centre with SMS on behind a trusted proxy
// (X-Forwarded-For names the client), and active readers to ask codes.
type codeEnv struct {
	*env
	t *testing.T
}

func newCodeEnv(t *testing.T, cfg Config) *codeEnv {
	t.Helper()
	clients, err := clientip.Parse("127.0.0.1/32")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Clients, cfg.Origin, cfg.SMSAuthToken, cfg.AdminToken = clients, "https://news.example.com", "tok", hooksAdmin
	return &codeEnv{env: newEnv(t, cfg), t: t}
}

// reader subscribes email (active) and answers its id and preference token.
func (e *codeEnv) reader(email string) (int64, string) {
	e.t.Helper()
	sub, err := e.store.Subscribe(context.Background(), store.SubscribeRequest{Email: email, Activate: true})
	if err != nil {
		e.t.Fatal(err)
	}
	return sub.ID, e.sign(e.t, token.Preferences, email)
}

// askCode posts a number for a code from client; it answers the status,
// the page and the Retry-After header.
func (e *codeEnv) askCode(tok, client, phone string) (int, string, string) {
	e.t.Helper()
	v := url.Values{"token": {tok}, "phone": {phone}}
	req, _ := http.NewRequest("POST", e.srv.URL+"/preferences/phone", strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", formCT)
	req.Header.Set("Origin", "https://news.example.com")
	req.Header.Set("X-Forwarded-For", client)
	resp, err := noRedirect.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Retry-After")
}

func (e *codeEnv) queuedCodes() int {
	e.t.Helper()
	list, err := e.insp.ListPendingTasks(tasks.QueueSMS)
	if err != nil && !strings.Contains(err.Error(), "not found") {
		e.t.Fatal(err)
	}
	return len(list)
}

// A number of a country not in NEWSLETTER_SMS_COUNTRIES is refused with
// the reason, in the preference centre and from the product backend:
// nothing stored, no code kept, no text queued. A number of a listed
// country goes on.
func TestSMSCountriesAllowlist(t *testing.T) {
	e := newCodeEnv(t, Config{SMSCountries: phone.Countries{"GB", "IE"}})
	ctx := context.Background()
	id, tok := e.reader("far@x.io")
	for _, far := range []string{"+1 415 555 2671", "+263 71 123 4567"} { // a US mobile, a Zimbabwean one
		status, page, _ := e.askCode(tok, "192.0.2.1", far)
		if status != 400 || !strings.Contains(page, "only to numbers in GB, IE") {
			t.Fatalf("a code to %s: %d", far, status)
		}
		if status, body := e.hookAdmin(t, "PUT", "/api/subscribers/far@x.io/phone", `{"phone":"`+far+`","consent_source":"app"}`); status != 400 || !strings.Contains(body, "GB, IE") {
			t.Fatalf("PUT %s: %d %s", far, status, body)
		}
	}
	if pending, err := e.store.PendingPhoneCode(ctx, id); err != nil || pending != "" {
		t.Fatalf("a code kept for a refused number: %q %v", pending, err)
	}
	if got, _ := e.store.PhonesOf(ctx, []int64{id}); got[0].Number != "" {
		t.Fatalf("a refused number stored: %+v", got[0])
	}
	if n := e.queuedCodes(); n != 0 {
		t.Fatalf("%d texts queued for refused numbers", n)
	}
	if status, _, _ := e.askCode(tok, "192.0.2.1", "+353 85 123 4567"); status != 200 || e.queuedCodes() != 1 {
		t.Fatalf("a code to an Irish mobile: %d, %d queued", status, e.queuedCodes())
	}
	if status, body := e.hookAdmin(t, "PUT", "/api/subscribers/far@x.io/phone", `{"phone":"+44 7400 123456","consent_source":"app"}`); status != 200 {
		t.Fatalf("PUT a British mobile: %d %s", status, body)
	}
}

// One client address has at most NEWSLETTER_SMS_CODES_PER_CLIENT codes
// texted an hour, whichever readers' tokens it holds: past them 429 with
// Retry-After, no code kept, no text queued, and the refusal counted in
// newsletter_sms_cap_reached_total{cap="per_client"}. Another client is
// served.
func TestSMSCodesPerClient(t *testing.T) {
	e := newCodeEnv(t, Config{SMSCountries: phone.Countries{"GB"}, SMSCodesPerClient: 2})
	ctx := context.Background()
	for i, email := range []string{"a@x.io", "b@x.io"} {
		_, tok := e.reader(email)
		if status, _, _ := e.askCode(tok, "192.0.2.1", "+44 7400 12345"+string(rune('0'+i))); status != 200 {
			t.Fatalf("code %d: %d", i+1, status)
		}
	}
	id, tok := e.reader("c@x.io")
	status, page, retry := e.askCode(tok, "192.0.2.1", "+44 7400 123459")
	if status != http.StatusTooManyRequests || retry == "" || !strings.Contains(page, "Too many codes") {
		t.Fatalf("a third code from one client: %d, Retry-After %q", status, retry)
	}
	if pending, _ := e.store.PendingPhoneCode(ctx, id); pending != "" || e.queuedCodes() != 2 {
		t.Fatalf("a refused code: kept %q, %d queued", pending, e.queuedCodes())
	}
	if _, metrics := e.get(t, "/metrics"); !strings.Contains(metrics, `newsletter_sms_cap_reached_total{cap="per_client"} 1`) {
		t.Fatalf("the refusal not counted:\n%s", metrics)
	}
	if status, _, _ := e.askCode(tok, "198.51.100.7", "+44 7400 123459"); status != 200 || e.queuedCodes() != 3 {
		t.Fatalf("another client: %d, %d queued", status, e.queuedCodes())
	}
}

// A signed callback replayed (Twilio's signature carries no time) changes
// nothing the second time: an old STOP after a START, an old failed
// status after the number was turned on again. A status with a passing
// code (30003 handset off, 30008 unknown) retires nothing; a callback
// that would change a number but names no message is refused.
func TestSMSCallbackReplay(t *testing.T) {
	gw := smstest.New(t)
	const public = "https://news.example.com"
	e := newHooksEnv(t, Config{Origin: public, SMSAuthToken: gw.AuthToken})
	ctx := context.Background()
	const number = "+447400123456"
	send := func(form url.Values) int {
		t.Helper()
		req := gw.SignedInbound(public+"/feedback/sms", form)
		u, _ := url.Parse(e.srv.URL + "/feedback/sms")
		req.URL, req.Host, req.RequestURI = u, u.Host, ""
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp.StatusCode
	}
	state := func() string {
		t.Helper()
		s, err := e.store.NumberState(ctx, number)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	inbound := func(sid, body string) url.Values {
		return url.Values{"From": {number}, "To": {"+15005550006"}, "Body": {body}, "MessageSid": {sid}, "AccountSid": {gw.AccountSID}}
	}
	status := func(sid, st, code string) url.Values {
		return url.Values{"MessageSid": {sid}, "MessageStatus": {st}, "ErrorCode": {code}, "To": {number}, "From": {"+15005550006"}, "AccountSid": {gw.AccountSID}}
	}
	steps := []struct {
		name string
		form url.Values
		code int
		want string
	}{
		{"STOP", inbound("SM10", "STOP"), 200, store.NumberStopped},
		{"START", inbound("SM11", "START"), 200, store.NumberOn},
		{"the STOP replayed", inbound("SM10", "STOP"), 200, store.NumberOn},
		{"handset off", status("SM20", "undelivered", "30003"), 200, store.NumberOn},
		{"unknown error", status("SM21", "failed", "30008"), 200, store.NumberOn},
		{"a landline", status("SM22", "undelivered", "30006"), 200, store.NumberRetired},
		{"no message named", url.Values{"From": {number}, "Body": {"START"}}, 400, store.NumberRetired},
		{"START again", inbound("SM12", "START"), 200, store.NumberOn},
		{"the landline status replayed", status("SM22", "undelivered", "30006"), 200, store.NumberOn},
		{"the STOP replayed again", inbound("SM10", "STOP"), 200, store.NumberOn},
	}
	for _, s := range steps {
		if code := send(s.form); code != s.code || state() != s.want {
			t.Fatalf("%s: %d, state %s; want %d, %s", s.name, code, state(), s.code, s.want)
		}
	}
}

// End to end over HTTP: every text carries its StatusCallback; the
// gateway (the fake, as Twilio) takes the texts and then posts their
// statuses, signed, to the service's public URL through a proxy. A number
// whose text was undelivered as a landline (30006) is retired and its
// next text is skipped; one undelivered with a passing code (30003,
// handset off) keeps its texts; a delivered one too.
func TestSMSStatusCallbackRetires(t *testing.T) {
	gw := smstest.New(t)
	const public = "https://news.example.com"
	e := newHooksEnv(t, Config{Origin: public, SMSAuthToken: gw.AuthToken})
	gw.RouteCallbacks(public, e.srv.URL)
	ctx := context.Background()
	numbers := []string{"+447400123456", "+447400123457", "+447400123458"}
	gw.Undelivered(numbers[0], 30006)
	gw.Undelivered(numbers[1], 30003)
	ids := make([]int64, len(numbers))
	for i, n := range numbers {
		sub, err := e.store.Subscribe(ctx, store.SubscribeRequest{Email: fmt.Sprintf("r%d@x.io", i), Activate: true, Topics: []string{topics.Updates}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.SetPhone(ctx, sub.ID, n, "test"); err != nil {
			t.Fatal(err)
		}
		ids[i] = sub.ID
	}
	lane := worker.NewHandlers(worker.Deps{Store: e.store.(worker.Store), Metrics: worker.NewMetrics(nil), Log: slog.New(slog.DiscardHandler),
		SMS: &sms.Client{BaseURL: gw.URL, AccountSID: gw.AccountSID, AuthToken: gw.AuthToken, From: "+15005550006",
			StatusCallback: public + "/feedback/sms"}}).SMS
	text := func(key string) {
		t.Helper()
		for _, id := range ids {
			if err := lane.HandleSMS(ctx, tasks.SMSPayload{Key: key, SubscriberID: id, Topics: []string{topics.Updates}, Text: "News"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	text("ev:1")
	for _, m := range gw.WaitFor(t, 3) {
		if m.StatusCallback != public+"/feedback/sms" {
			t.Fatalf("a text's StatusCallback %q", m.StatusCallback)
		}
	}
	for _, cb := range gw.WaitCallbacks(t, 6) { // sent, then delivered or undelivered, for each
		if cb.Err != nil || cb.Status != 200 {
			t.Fatalf("a status callback: %+v", cb)
		}
	}
	for i, want := range []string{store.NumberRetired, store.NumberOn, store.NumberOn} {
		if got, err := e.store.NumberState(ctx, numbers[i]); err != nil || got != want {
			t.Fatalf("%s: %q %v, want %s", numbers[i], got, err, want)
		}
	}
	text("ev:2")
	to := map[string]int{}
	for _, m := range gw.Messages() {
		to[m.To]++
	}
	if to[numbers[0]] != 1 || to[numbers[1]] != 2 || to[numbers[2]] != 2 {
		t.Fatalf("texts by number %v: want the landline's second text skipped", to)
	}
}

// forgetfulStore cannot remember a callback (Redis failing at that step).
type forgetfulStore struct{ Store }

func (forgetfulStore) RememberSMSCallback(context.Context, string, time.Duration) error {
	return errors.New("redis: connection refused")
}

// A STOP whose callback cannot be remembered against replay is applied
// all the same (200): a fault may let a replay through, never lose a
// STOP.
func TestSMSCallbackNotRememberedStillApplied(t *testing.T) {
	gw := smstest.New(t)
	const public = "https://news.example.com"
	e := newEnvWith(t, Config{Origin: public, SMSAuthToken: gw.AuthToken}, func(d *Deps) { d.Store = forgetfulStore{d.Store} })
	form := url.Values{"From": {"+447400123456"}, "To": {"+15005550006"}, "Body": {"STOP"}, "MessageSid": {"SM1"}}
	req := gw.SignedInbound(public+"/feedback/sms", form)
	u, _ := url.Parse(e.srv.URL + "/feedback/sms")
	req.URL, req.Host, req.RequestURI = u, u.Host, ""
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if state, err := e.store.NumberState(context.Background(), "+447400123456"); resp.StatusCode != 200 || state != store.NumberStopped {
		t.Fatalf("%d, state %q %v", resp.StatusCode, state, err)
	}
}
