package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/internal/topics"

	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/store"
)

// peopleAdmin is adminRaw with this file's token.
func (e *env) peopleAdmin(t *testing.T, method, path string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestListSubscribers(t *testing.T) {
	e := newEnv(t, Config{AdminToken: "s3cret", DoubleOptIn: false})
	ctx := context.Background()
	// The pages are in id order, which is not the order of signing up
	// (an id carries its shard).
	var subs []store.Subscriber
	for i := range 7 {
		email := fmt.Sprintf("l%d@example.com", i)
		sub, err := e.store.Subscribe(ctx, store.SubscribeRequest{Email: email, Activate: true, Topics: []string{[]string{"digest", "updates"}[i%2]}})
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	slices.SortFunc(subs, func(a, b store.Subscriber) int { return cmp.Compare(a.ID, b.ID) })
	var want []string
	for _, s := range subs {
		want = append(want, s.Email)
	}
	must2(t)(e.store.Unsubscribe(ctx, "l3@example.com"))
	// Every page by keyset, three at a time.
	var got []string
	after := ""
	for range 10 {
		resp, body := e.peopleAdmin(t, "GET", "/api/subscribers?limit=3"+after)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		var page struct {
			Subscribers []struct {
				ID     int64    `json:"id"`
				Email  string   `json:"email"`
				Status string   `json:"status"`
				Topics []string `json:"topics"`
			} `json:"subscribers"`
			Next int64 `json:"next"`
		}
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Subscribers {
			got = append(got, s.Email)
		}
		if page.Next == 0 {
			break
		}
		after = fmt.Sprintf("&after=%d", page.Next)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages: %v, want %v", got, want)
	}
	_, body := e.peopleAdmin(t, "GET", "/api/subscribers?status=active&topic=updates")
	for _, w := range []string{"l1@", "l5@"} {
		if !strings.Contains(body, w) {
			t.Fatalf("active in updates lacks %s: %s", w, body)
		}
	}
	for _, no := range []string{"l0@", "l3@", "l2@"} {
		if strings.Contains(body, no) {
			t.Fatalf("active in updates lists %s: %s", no, body)
		}
	}
	_, body = e.peopleAdmin(t, "GET", "/api/subscribers?status=unsubscribed")
	if !strings.Contains(body, "l3@") || strings.Count(body, `"email"`) != 1 {
		t.Fatalf("unsubscribed: %s", body)
	}
	for _, bad := range []string{"status=gone", "topic=sports", "limit=0", "limit=501", "limit=x", "after=-1", "after=x"} {
		if resp, body := e.peopleAdmin(t, "GET", "/api/subscribers?"+bad); resp.StatusCode != 400 || !strings.Contains(body, "error") {
			t.Fatalf("%s: %d %s", bad, resp.StatusCode, body)
		}
	}
	if resp, _ := e.get(t, "/api/subscribers"); resp.StatusCode != 401 {
		t.Fatalf("without a token: %d", resp.StatusCode)
	}
}

func TestStatsRoute(t *testing.T) {
	e := newEnv(t, Config{AdminToken: "s3cret", DoubleOptIn: true})
	if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"s@example.com"}`); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	resp, body := e.peopleAdmin(t, "GET", "/api/stats?days=7")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var st store.Stats
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if st.ByStatus[store.Pending] != 1 || len(st.Days) != 7 || st.Days[6].Signups != 1 {
		t.Fatalf("stats: %s", body)
	}
	if _, body := e.peopleAdmin(t, "GET", "/api/stats"); !strings.Contains(body, `"days"`) || strings.Count(body, `"day"`) != store.MaxStatsDays {
		t.Fatalf("default days: %.300s", body)
	}
	for _, bad := range []string{"-1", "91", "x"} {
		if resp, _ := e.peopleAdmin(t, "GET", "/api/stats?days="+bad); resp.StatusCode != 400 {
			t.Fatalf("days=%s: %d", bad, resp.StatusCode)
		}
	}
}

func TestExportAndEraseByAdmin(t *testing.T) {
	e := newEnv(t, Config{AdminToken: "s3cret", DoubleOptIn: true})
	ctx := context.Background()
	if resp, _ := e.post(t, "/subscribe", formCT, "email=Ex%40Example.com&name=Ex+Ample"); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	must2(t)(e.store.Confirm(ctx, "ex@example.com", outbox.Entry{}))
	resp, body := e.peopleAdmin(t, "GET", "/api/subscribers/EX@example.com/export")
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("export: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	var pd struct {
		ExportedAt string `json:"exported_at"`
		Subscriber struct {
			Email, Name, Status string
		} `json:"subscriber"`
		Consent struct {
			Source      string `json:"source"`
			RequestedAt string `json:"requested_at"`
			ConfirmedAt string `json:"confirmed_at"`
		} `json:"consent"`
		Mails []any `json:"mails_sent"`
	}
	if err := json.Unmarshal([]byte(body), &pd); err != nil {
		t.Fatal(err)
	}
	if pd.Subscriber.Email != "ex@example.com" || pd.Subscriber.Name != "Ex Ample" || pd.Consent.Source != "form" ||
		pd.Consent.RequestedAt == "" || pd.Consent.ConfirmedAt == "" || pd.ExportedAt == "" || pd.Mails == nil {
		t.Fatalf("export: %s", body)
	}
	// Bad input: nothing changes.
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/subscribers/nobody@example.com/export"}, {"DELETE", "/api/subscribers/nobody@example.com"},
	} {
		if resp, body := e.peopleAdmin(t, c.method, c.path); resp.StatusCode != 404 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, resp.StatusCode, body)
		}
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/subscribers/not-an-address/export"}, {"DELETE", "/api/subscribers/not-an-address"},
	} {
		if resp, _ := e.peopleAdmin(t, c.method, c.path); resp.StatusCode != 400 {
			t.Fatalf("%s %s: %d", c.method, c.path, resp.StatusCode)
		}
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/subscribers/ex@example.com/export"}, {"DELETE", "/api/subscribers/ex@example.com"},
	} {
		req, _ := http.NewRequest(c.method, e.srv.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("%s %s without a token: %d", c.method, c.path, resp.StatusCode)
		}
	}
	if e.status(t, "ex@example.com") != store.Active {
		t.Fatal("a refused request changed the subscriber")
	}
	// The welcome waits in the queue with the address in it: the erase
	// deletes it.
	if n := e.taskCount(t, "default") + e.taskCount(t, "transactional"); n == 0 {
		t.Fatal("set-up: no task waiting")
	}
	if resp, body := e.peopleAdmin(t, "DELETE", "/api/subscribers/ex@example.com"); resp.StatusCode != 204 {
		t.Fatalf("erase: %d %s", resp.StatusCode, body)
	}
	if e.status(t, "ex@example.com") != "" {
		t.Fatal("still on the list after the erase")
	}
	for _, q := range []string{"default", "transactional"} {
		if n := e.taskCount(t, q); n != 0 {
			t.Fatalf("%d tasks left in %s after the erase", n, q)
		}
	}
	if resp, _ := e.peopleAdmin(t, "DELETE", "/api/subscribers/ex@example.com"); resp.StatusCode != 404 {
		t.Fatalf("erase twice: %d", resp.StatusCode)
	}
	// Their own signup still works.
	if resp, _ := e.post(t, "/subscribe", formCT, "email=ex%40example.com"); resp.StatusCode != 202 || e.status(t, "ex@example.com") != store.Pending {
		t.Fatalf("signup after erase: %d %s", resp.StatusCode, e.status(t, "ex@example.com"))
	}
}

// prefsPost posts a form to a preference centre path as our own page does
// (origin), or as another site's.
func (e *env) prefsPost(t *testing.T, path, origin string, v url.Values) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", formCT)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestPreferenceCentreExportAndErase(t *testing.T) {
	const origin = "https://news.example.com"
	e := newEnv(t, Config{DoubleOptIn: false, Origin: origin})
	if resp, _ := e.post(t, "/subscribe", formCT, "email=me%40example.com&name=Mia"); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	tok := e.sign(t, token.Preferences, "me@example.com")
	_, page := e.get(t, "/preferences?token="+url.QueryEscape(tok))
	for _, w := range []string{`action="/preferences/export"`, `action="/preferences/erase"`} {
		if !strings.Contains(page, w) {
			t.Fatalf("the preference centre lacks %s", w)
		}
	}
	v := url.Values{"token": {tok}}
	// Export: a file of their data.
	resp, body := e.prefsPost(t, "/preferences/export", origin, v)
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Disposition"), "attachment") ||
		!strings.Contains(body, `"email":"me@example.com"`) || !strings.Contains(body, `"name":"Mia"`) {
		t.Fatalf("export: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	// Refused: another site, another token's purpose, a broken token;
	// and a GET or HEAD (a link scanner) has no route at all.
	bad := []struct {
		path, origin string
		v            url.Values
		code         int
	}{
		{"/preferences/export", "https://evil.example", v, 403},
		{"/preferences/erase", "https://evil.example", url.Values{"token": {tok}, "confirm": {"yes"}}, 403},
		{"/preferences/erase", "", url.Values{"token": {tok}, "confirm": {"yes"}}, 403},
		{"/preferences/erase", origin, url.Values{"token": {e.sign(t, token.Unsubscribe, "me@example.com")}, "confirm": {"yes"}}, 400},
		{"/preferences/export", origin, url.Values{"token": {tok + "x"}}, 400},
	}
	for _, c := range bad {
		if resp, _ := e.prefsPost(t, c.path, c.origin, c.v); resp.StatusCode != c.code {
			t.Fatalf("%s from %q: %d, want %d", c.path, c.origin, resp.StatusCode, c.code)
		}
	}
	for _, m := range []string{"GET", "HEAD"} {
		req, _ := http.NewRequest(m, e.srv.URL+"/preferences/erase?token="+url.QueryEscape(tok)+"&confirm=yes", nil)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("%s erase: %d", m, resp.StatusCode)
		}
	}
	if e.status(t, "me@example.com") != store.Active {
		t.Fatal("a refused request erased")
	}
	// The first post asks again; it erases nothing.
	resp, body = e.prefsPost(t, "/preferences/erase", origin, v)
	if resp.StatusCode != 200 || !strings.Contains(body, `name="confirm" value="yes"`) || e.status(t, "me@example.com") != store.Active {
		t.Fatalf("erase, first post: %d %s", resp.StatusCode, body)
	}
	resp, body = e.prefsPost(t, "/preferences/erase", origin, url.Values{"token": {tok}, "confirm": {"yes"}})
	if resp.StatusCode != 200 || !strings.Contains(body, "erased") {
		t.Fatalf("erase: %d %s", resp.StatusCode, body)
	}
	if e.status(t, "me@example.com") != "" {
		t.Fatal("not erased")
	}
	if n := e.taskCount(t, "default"); n != 0 {
		t.Fatalf("the welcome (%d tasks) still waits after the erase", n)
	}
	// The link in an old mail now finds nobody.
	if resp, body := e.prefsPost(t, "/preferences/export", origin, v); resp.StatusCode != 200 || strings.Contains(body, "me@example.com") {
		t.Fatalf("export after erase: %d %s", resp.StatusCode, body)
	}
}

// must2 fails the test on a set-up step's error: must2(t)(s.Subscribe(...)).
func must2(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Someone who left still reaches their data from the link in an old mail.
func TestEndedSubscriptionOffersDataRequests(t *testing.T) {
	const origin = "https://news.example.com"
	e := newEnv(t, Config{DoubleOptIn: false, Origin: origin})
	if resp, _ := e.post(t, "/subscribe", formCT, "email=left%40example.com"); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	must2(t)(e.store.Unsubscribe(context.Background(), "left@example.com"))
	tok := e.sign(t, token.Preferences, "left@example.com")
	_, page := e.get(t, "/preferences?token="+url.QueryEscape(tok))
	if !strings.Contains(page, "You are not subscribed") || !strings.Contains(page, `action="/preferences/erase"`) || !strings.Contains(page, `action="/preferences/export"`) {
		t.Fatalf("ended page:\n%s", page)
	}
	if resp, _ := e.prefsPost(t, "/preferences/erase", origin, url.Values{"token": {tok}, "confirm": {"yes"}}); resp.StatusCode != 200 || e.status(t, "left@example.com") != "" {
		t.Fatalf("erase after leaving: %d", resp.StatusCode)
	}
}

// An export and an erasure are in the audit log, with who did them and
// the person by the keyed hash only.
func TestExportAndEraseAreAudited(t *testing.T) {
	s, st, _, _ := matrixServerStore(t)
	const admin = "matrix-admin-token-0123"
	must2(t)(st.Subscribe(context.Background(), store.SubscribeRequest{Email: "audited@example.com", Name: "Aude", Activate: true}))
	if rec := call(s, "GET", "/api/subscribers/audited@example.com/export", admin, ""); rec.Code != http.StatusOK {
		t.Fatalf("export: %d %s", rec.Code, rec.Body)
	}
	if rec := call(s, "DELETE", "/api/subscribers/audited@example.com", admin, ""); rec.Code != http.StatusNoContent {
		t.Fatalf("erase: %d %s", rec.Code, rec.Body)
	}
	rec := call(s, "GET", "/api/audit?limit=10", admin, "")
	var page auditPage
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &page) != nil || len(page.Entries) != 2 {
		t.Fatalf("audit: %d %s", rec.Code, rec.Body)
	}
	if page.Entries[0].Action != "subscriber.erased" || page.Entries[1].Action != "subscriber.exported" ||
		!strings.HasPrefix(page.Entries[0].Target, "subscriber:") || page.Entries[0].Target != page.Entries[1].Target || page.Entries[0].Role != "admin" {
		t.Fatalf("audit entries: %+v", page.Entries)
	}
	if strings.Contains(strings.ToLower(rec.Body.String()), "audited@") {
		t.Fatalf("the audit log names the address: %s", rec.Body)
	}
}

// A retired topic is not on the preference centre, and saving the page
// keeps it for who had it; leaving everything still leaves it.
func TestPreferencesKeepARetiredTopic(t *testing.T) {
	const origin = "https://news.example.com"
	set := topics.Default(0)
	set.Topics = append(set.Topics, topics.Topic{ID: "essays", Name: "Long essays"})
	src := &swappedTopics{}
	src.cur.Store(set)
	e := newEnv(t, Config{DoubleOptIn: false, Origin: origin, Topics: src})
	if resp, _ := e.post(t, "/subscribe", formCT, "email=me%40example.com&topics=digest&topics=essays"); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	retired := *set
	retired.Topics = slices.Clone(set.Topics)
	retired.Topics[2].Retired = true
	src.cur.Store(&retired) // as a save in the console does
	tok := e.sign(t, token.Preferences, "me@example.com")
	if _, page := e.get(t, "/preferences?token="+url.QueryEscape(tok)); strings.Contains(page, `value="essays"`) {
		t.Fatal("the retired topic is offered on the preference centre")
	}
	v := url.Values{"token": {tok}, "topics": {"updates"}, "name": {"Mia"}}
	if resp, body := e.prefsPost(t, "/preferences", origin, v); resp.StatusCode >= 400 {
		t.Fatalf("save: %d %.300s", resp.StatusCode, body)
	}
	sub, err := e.store.Get(context.Background(), "me@example.com")
	if err != nil || !slices.Equal(sub.Topics, []string{"updates", "essays"}) {
		t.Fatalf("after the save: %v %v, want updates and the retired essays kept", sub.Topics, err)
	}
}

// swappedTopics is a topics.Source a test changes, as the catalog is.
type swappedTopics struct{ cur atomic.Pointer[topics.Set] }

func (s *swappedTopics) Current() *topics.Set { return s.cur.Load() }

// The person's export says which browsers and app installs exist, each by
// the ends of its endpoint, keys or token, and hands out none of them
// whole: with them anyone could notify the person's phone or browser.
func TestExportMasksDeviceTokensAndPushKeys(t *testing.T) {
	e := newEnv(t, Config{AdminToken: "s3cret"})
	ctx := context.Background()
	sub, err := e.store.Subscribe(ctx, store.SubscribeRequest{Email: "keys@example.com", Activate: true})
	if err != nil {
		t.Fatal(err)
	}
	token := "cDeF_123:" + strings.Repeat("APA91b-x", 20) + "END9"
	if _, err := e.store.AddDevice(ctx, sub.ID, store.Device{Platform: store.PlatformFCM, Token: token}); err != nil {
		t.Fatal(err)
	}
	p256dh, auth := bytes.Repeat([]byte{0x04, 0xab}, 32), bytes.Repeat([]byte{0x5a}, 16)
	p256dh = append(p256dh, 0x01)
	endpoint := "https://fcm.googleapis.com/fcm/send/secret-subscription-id-0123456789"
	if err := e.store.AddPushSubscription(ctx, sub.ID, store.PushSubscription{Endpoint: endpoint, P256DH: p256dh, Auth: auth}); err != nil {
		t.Fatal(err)
	}
	resp, body := e.peopleAdmin(t, "GET", "/api/subscribers/keys@example.com/export")
	if resp.StatusCode != 200 {
		t.Fatalf("export: %d %s", resp.StatusCode, body)
	}
	enc := base64.RawURLEncoding
	for _, secret := range []string{token, endpoint, enc.EncodeToString(p256dh), enc.EncodeToString(auth), base64.StdEncoding.EncodeToString(auth), "secret-subscription-id"} {
		if strings.Contains(body, secret) {
			t.Errorf("the export holds %q whole: %s", secret, body)
		}
	}
	var pd struct {
		Push []struct {
			Service, Endpoint, P256DH, Auth string
		} `json:"push_subscriptions"`
		Devices []struct {
			ID, Platform, Token string
		} `json:"devices"`
	}
	if err := json.Unmarshal([]byte(body), &pd); err != nil {
		t.Fatal(err)
	}
	if len(pd.Devices) != 1 || pd.Devices[0].Token != "cDeF…END9" || pd.Devices[0].Platform != store.PlatformFCM || pd.Devices[0].ID == "" {
		t.Errorf("devices %+v: want the token's ends", pd.Devices)
	}
	a := enc.EncodeToString(auth)
	if len(pd.Push) != 1 || pd.Push[0].Service != "fcm.googleapis.com" || !strings.HasPrefix(pd.Push[0].P256DH, "BKsE") || pd.Push[0].Auth != a[:4]+"…"+a[len(a)-4:] {
		t.Errorf("browsers %+v: want the service and the keys' ends", pd.Push)
	}
}
