package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// The product backend gives a person a mobile number with the consent it
// recorded: stored in E.164 with the number's state; a number that does
// not parse, is national, or is not a mobile, a missing consent, an
// unknown or inactive person: refused with the reason, nothing stored.
func TestPhoneByAPI(t *testing.T) {
	e := newHooksEnv(t, Config{})
	ctx := context.Background()
	sub, err := e.store.Subscribe(ctx, store.SubscribeRequest{Email: "sms@x.io", Activate: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Subscribe(ctx, store.SubscribeRequest{Email: "pending@x.io"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, body string
		status     int
		says       string
	}{
		{"/api/subscribers/sms@x.io/phone", `{"phone":"+44 7400 123456"}`, 400, "consent_source"},
		{"/api/subscribers/sms@x.io/phone", `{"phone":"+44 7400 123456","consent_source":"a\nb"}`, 400, "consent_source"},
		{"/api/subscribers/sms@x.io/phone", `{"phone":"07400 123456","consent_source":"app"}`, 400, ""},
		{"/api/subscribers/sms@x.io/phone", `{"phone":"+44 20 7946 0958","consent_source":"app"}`, 400, "landline"},
		{"/api/subscribers/sms@x.io/phone", `{"phone":"call me","consent_source":"app"}`, 400, ""},
		{"/api/subscribers/sms@x.io/phone", `{"phone":"+44 7400 123456","consent_source":"app","x":1}`, 400, "unknown field"},
		{"/api/subscribers/nobody@x.io/phone", `{"phone":"+44 7400 123456","consent_source":"app"}`, 404, "no subscriber"},
		{"/api/subscribers/pending@x.io/phone", `{"phone":"+44 7400 123456","consent_source":"app"}`, 409, "not an active"},
	} {
		status, body := e.hookAdmin(t, "PUT", c.path, c.body)
		if status != c.status || !strings.Contains(body, c.says) {
			t.Errorf("PUT %s %s: %d %s, want %d saying %q", c.path, c.body, status, body, c.status, c.says)
		}
	}
	if got, _ := e.store.PhonesOf(ctx, []int64{sub.ID}); got[0].Number != "" {
		t.Fatalf("a refused number was stored: %+v", got[0])
	}
	status, body := e.hookAdmin(t, "PUT", "/api/subscribers/sms@x.io/phone", `{"phone":"+44 7400 123456","consent_source":"checkout, 2026-12-04"}`)
	var p store.Phone
	if status != 200 || json.Unmarshal([]byte(body), &p) != nil || p.Number != "+447400123456" || p.State != store.NumberOn || p.Source != "checkout, 2026-12-04" {
		t.Fatalf("put: %d %s", status, body)
	}
	if status, _ := e.hookAdmin(t, "DELETE", "/api/subscribers/sms@x.io/phone", ""); status != 204 {
		t.Fatalf("delete: %d", status)
	}
	if status, body := e.hookAdmin(t, "DELETE", "/api/subscribers/sms@x.io/phone", ""); status != 404 || !strings.Contains(body, "no phone") {
		t.Fatalf("delete again: %d %s", status, body)
	}
}

// An event may name its channels: each exactly one of email, push, sms
// (no spaces around it), none twice, not an empty list; otherwise 400,
// the bad name quoted by its first 40 bytes, and nothing queued.
func TestEventChannels(t *testing.T) {
	e := newHooksEnv(t, Config{})
	for body, says := range map[string]string{
		`{"topic":"updates","title":"T","url":"https://x.io/t","channels":["fax"]}`:                              "unknown channel",
		`{"topic":"updates","title":"T","url":"https://x.io/t","channels":["sms","sms"]}`:                        "twice",
		`{"topic":"updates","title":"T","url":"https://x.io/t","channels":[" email"]}`:                           "unknown channel",
		`{"topic":"updates","title":"T","url":"https://x.io/t","channels":["email\u00a0"]}`:                      "unknown channel",
		`{"topic":"updates","title":"T","url":"https://x.io/t","channels":["` + strings.Repeat("x", 500) + `"]}`: `unknown channel \"` + strings.Repeat("x", 40) + `…\"`,
		`{"topic":"updates","title":"T","url":"https://x.io/t","channels":[]}`:                                   "empty",
		`{"topic":"updates","title":"T","url":"https://x.io/t","channels":"sms"}`:                                "list",
		`{"topic":"updates","title":"T","url":"https://x.io/t","channels":["sms","email"]}`:                      "",
	} {
		status, got := e.hookAdmin(t, "POST", "/api/events", body)
		want := 400
		if says == "" {
			want = 202
		}
		if status != want || !strings.Contains(got, says) {
			t.Errorf("%s: %d %s, want %d saying %q", body, status, got, want, says)
		}
	}
	info, err := e.insp.GetQueueInfo(tasks.QueueOf(tasks.TypeFanout))
	if err != nil || info.Size != 1 {
		t.Fatalf("%+v %v: want the one good event's task queued", info, err)
	}
}

// The preference centre shows each topic's channels (texts only with a
// number that takes them) and saves what is ticked; a number that said
// STOP is named with how to turn texts back on; a post that did not show
// the channels leaves them as they were.
func TestPreferenceCentreChannels(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: false, Origin: "https://news.example.com", AppPush: true})
	ctx := context.Background()
	if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"c@x.io","topics":["digest","updates"]}`); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	sub, _ := e.store.Get(ctx, "c@x.io")
	tok := e.sign(t, token.Preferences, "c@x.io")
	_, page := e.get(t, "/preferences?token="+url.QueryEscape(tok))
	if !strings.Contains(page, `value="updates:email" checked`) || !strings.Contains(page, `value="updates:push" checked`) || strings.Contains(page, `updates:sms`) {
		t.Fatalf("without a number: %s", page)
	}
	if _, err := e.store.SetPhone(ctx, sub.ID, "+447400123456", "app"); err != nil {
		t.Fatal(err)
	}
	_, page = e.get(t, "/preferences?token="+url.QueryEscape(tok))
	if !strings.Contains(page, `value="updates:sms">`) {
		t.Fatalf("with a number, texts are offered off: %s", page)
	}
	post := func(v url.Values) int {
		req, _ := http.NewRequest("POST", e.srv.URL+"/preferences", strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", formCT)
		req.Header.Set("Origin", "https://news.example.com")
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	form := url.Values{"token": {tok}, "topics": {"digest", "updates"}, "channels_shown": {"1"},
		"channels": {"digest:email", "updates:sms", "updates:push"}}
	if code := post(form); code != http.StatusSeeOther {
		t.Fatalf("save: %d", code)
	}
	got, _ := e.store.ChannelsOf(ctx, []int64{sub.ID})
	if got[0].Wants("updates", store.ChannelEmail) || !got[0].Wants("updates", store.ChannelSMS) || !got[0].Wants("digest", store.ChannelEmail) || got[0].Wants("digest", store.ChannelPush) {
		t.Fatalf("saved %+v", got[0])
	}
	form.Set("channels", "nonsense:sms")
	if code := post(form); code != 400 {
		t.Fatalf("an unknown choice: %d, want 400", code)
	}
	if code := post(url.Values{"token": {tok}, "topics": {"digest", "updates"}, "name": {"Cy"}}); code != http.StatusSeeOther {
		t.Fatalf("an older form: %d", code)
	}
	if again, _ := e.store.ChannelsOf(ctx, []int64{sub.ID}); !again[0].Wants("updates", store.ChannelSMS) || again[0].Wants("updates", store.ChannelEmail) {
		t.Fatalf("a form without the channels changed them: %+v", again[0])
	}
	if err := e.store.SetNumberState(ctx, "+447400123456", store.NumberStopped); err != nil {
		t.Fatal(err)
	}
	_, page = e.get(t, "/preferences?token="+url.QueryEscape(tok))
	if strings.Contains(page, "updates:sms") || !strings.Contains(page, "replied STOP") || strings.Contains(page, "+447400123456") {
		t.Fatalf("a stopped number: %s", page)
	}
}

// With SMS on, an event whose title and link would make a text over the
// cap is refused, unless it leaves SMS out.
func TestEventTooLongForText(t *testing.T) {
	e := newHooksEnv(t, Config{SMSAuthToken: "tok", SMSMaxSegments: 1})
	long := `{"topic":"updates","title":"` + strings.Repeat("word ", 30) + `","url":"https://x.io/t"`
	if status, body := e.hookAdmin(t, "POST", "/api/events", long+`}`); status != 400 || !strings.Contains(body, "text message") {
		t.Fatalf("a long event: %d %s", status, body)
	}
	if status, body := e.hookAdmin(t, "POST", "/api/events", long+`,"channels":["email","push"]}`); status != 202 {
		t.Fatalf("a long event without SMS: %d %s", status, body)
	}
}

// A person gives their own number in the preference centre: a code is
// texted to it (one a minute); until the gateway took its text no code
// is checked (the right one is refused too, and the number not saved); a
// wrong code is refused, the right one saves the number with the
// preference centre and the message that carried the code as its
// consent, and the person can take it away again. A landline is refused
// with the reason.
func TestPreferenceCentrePhoneByCode(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: false, Origin: "https://news.example.com", SMSAuthToken: "tok", Publisher: "The Weekly"})
	ctx := context.Background()
	if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"p@x.io","topics":["updates"]}`); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	sub, _ := e.store.Get(ctx, "p@x.io")
	tok := e.sign(t, token.Preferences, "p@x.io")
	post := func(path string, v url.Values) (int, string) {
		v.Set("token", tok)
		req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", formCT)
		req.Header.Set("Origin", "https://news.example.com")
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if _, page := e.get(t, "/preferences?token="+url.QueryEscape(tok)); !strings.Contains(page, `action="/preferences/phone"`) {
		t.Fatalf("no number form: %s", page)
	}
	if code, page := post("/preferences/phone", url.Values{"phone": {"+44 20 7946 0958"}}); code != 400 || !strings.Contains(page, "landline") {
		t.Fatalf("a landline: %d", code)
	}
	if code, page := post("/preferences/phone", url.Values{"phone": {"+44 7400 123456"}}); code != 200 || !strings.Contains(page, "••••456") || !strings.Contains(page, `action="/preferences/phone/confirm"`) {
		t.Fatalf("ask for a code: %d %s", code, page)
	}
	if code, _ := post("/preferences/phone", url.Values{"phone": {"+44 7400 123456"}}); code != http.StatusTooManyRequests {
		t.Fatalf("a second code at once: %d, want 429", code)
	}
	tasksIn, err := e.insp.ListPendingTasks(tasks.QueueSMS)
	if err != nil || len(tasksIn) != 1 {
		t.Fatalf("%d code texts queued (%v)", len(tasksIn), err)
	}
	var p tasks.SMSCodePayload
	if err := json.Unmarshal(tasksIn[0].Payload, &p); err != nil || p.Number != "+447400123456" || !strings.HasPrefix(p.Text, "The Weekly: your code is ") {
		t.Fatalf("the code text %+v %v", p, err)
	}
	code := strings.Fields(strings.TrimPrefix(p.Text, "The Weekly: your code is "))[0]
	code = strings.TrimSuffix(code, ".")
	if p.Code != code {
		t.Fatalf("the payload's code %q, the text's %q", p.Code, code)
	}
	if status, page := post("/preferences/phone/confirm", url.Values{"code": {code}}); status != http.StatusConflict || !strings.Contains(page, "not gone out yet") {
		t.Fatalf("the right code before its text went out: %d", status)
	}
	if got, _ := e.store.PhonesOf(ctx, []int64{sub.ID}); got[0].Number != "" {
		t.Fatal("a code whose text never went out saved the number")
	}
	// The sms lane's part (TestSMSCode): the gateway took the text.
	if err := e.store.PhoneCodeSent(ctx, sub.ID, p.Number, p.Code, "SMproof"); err != nil {
		t.Fatal(err)
	}
	if status, page := post("/preferences/phone/confirm", url.Values{"code": {"000000"}}); status != 400 || !strings.Contains(page, "not the code") {
		t.Fatalf("a wrong code: %d", status)
	}
	if got, _ := e.store.PhonesOf(ctx, []int64{sub.ID}); got[0].Number != "" {
		t.Fatal("a wrong code saved the number")
	}
	if status, page := post("/preferences/phone/confirm", url.Values{"code": {code}}); status != 200 || !strings.Contains(page, "Your number is saved") || !strings.Contains(page, "updates:sms") {
		t.Fatalf("the right code: %d %s", status, page)
	}
	got, _ := e.store.PhonesOf(ctx, []int64{sub.ID})
	if got[0].Number != "+447400123456" || got[0].Source != "preference centre (texted code, message SMproof)" {
		t.Fatalf("saved %+v", got[0])
	}
	if status, _ := post("/preferences/phone", url.Values{"remove": {"1"}}); status != 200 {
		t.Fatalf("remove: %d", status)
	}
	if got, _ := e.store.PhonesOf(ctx, []int64{sub.ID}); got[0].Number != "" {
		t.Fatalf("the number was kept: %+v", got[0])
	}
}
