package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// loader sends the soak's traffic to the API replicas at a bounded rate:
// signups, confirmations (from the confirmation mails), preference
// changes and unsubscribes (from the welcome's preferences link), events
// for one person, and now and then an issue to the updates topic.
type loader struct {
	apis    []*role
	base    string // NEWSLETTER_BASE_URL: the origin of the mails' links
	admin   string
	run     string // names the addresses of this run
	led     *ledger
	client  *http.Client
	rate    float64 // operations a second
	signups int     // at most this many addresses
}

func (ld *loader) loop(ctx context.Context, issueEvery time.Duration) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / ld.rate))
	defer tick.Stop()
	lastIssue := time.Now()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if time.Since(lastIssue) > issueEvery {
			lastIssue = time.Now()
			go ld.sendIssue(ctx)
			continue
		}
		go ld.one(ctx, n)
	}
}

// one does one operation: a confirmation when one waits (a person does
// not wait long), else by weight.
func (ld *loader) one(ctx context.Context, n int) {
	start := rand.IntN(1 << 20)
	ld.led.mu.Lock()
	p := ld.led.pick(start, func(p *person) bool { return p.confirmToken != "" && !p.confirmTried })
	if p != nil {
		p.confirmTried = true
	}
	active := ld.led.pick(start, func(p *person) bool {
		return p.prefsToken != "" && p.unsubAck.IsZero() && !p.confirmAck.IsZero()
	})
	count := len(ld.led.order)
	ld.led.mu.Unlock()
	switch r := rand.Float64(); {
	case p != nil:
		ld.confirm(ctx, p)
	case active != nil && r < 0.15:
		ld.unsubscribe(ctx, active)
	case active != nil && r < 0.35:
		ld.preferences(ctx, active, n)
	case active != nil && r < 0.55:
		ld.event(ctx, active, n)
	case count < ld.signups:
		ld.signup(ctx, fmt.Sprintf("soak-%s-%06d@example.org", ld.run, n))
	}
}

// api is a live replica's origin, picked at random.
func (ld *loader) api() string {
	r := ld.apis[rand.IntN(len(ld.apis))]
	return "http://" + r.addr
}

// do sends one request and says whether it was acknowledged (2xx, or
// the 303 of a form saved) with the time it took.
func (ld *loader) do(ctx context.Context, method, path, ctype string, body []byte, admin bool) (int, []byte, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, ld.api()+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, 0, err
	}
	req.Header.Set("Content-Type", ctype)
	// The forms check that a post comes from the service's own pages.
	req.Header.Set("Origin", ld.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if admin {
		req.Header.Set("Authorization", "Bearer "+ld.admin)
	}
	t0 := time.Now()
	resp, err := ld.client.Do(req)
	took := time.Since(t0)
	if err != nil {
		return 0, nil, took, err
	}
	defer func() { warn("close body", resp.Body.Close()) }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, raw, took, err
}

func acked(code int) bool { return code >= 200 && code < 400 }

func (ld *loader) note(what string, code int, err error) {
	if err != nil || !acked(code) {
		ld.led.mu.Lock()
		ld.led.failed[fmt.Sprintf("%s %d", what, code)]++
		ld.led.mu.Unlock()
	}
}

func (ld *loader) signup(ctx context.Context, email string) {
	body, _ := json.Marshal(map[string]any{"email": email}) // a map of a string: cannot fail
	t0 := time.Now()
	code, _, took, err := ld.do(ctx, "POST", "/subscribe", "application/json", body, false)
	ld.note("subscribe", code, err)
	ld.led.mu.Lock()
	defer ld.led.mu.Unlock()
	ld.led.subscribe = append(ld.led.subscribe, sample{at: t0, latency: took, ok: err == nil && acked(code)})
	if err == nil && acked(code) {
		ld.led.person(email).signupAck = time.Now()
		ld.led.acks++
	}
}

// form posts a form; saved says which answer means it was saved (nil:
// any acknowledgement).
func (ld *loader) form(ctx context.Context, what, path string, v url.Values, p *person, saved func(int) bool, record func(*person, time.Time)) {
	code, _, _, err := ld.do(ctx, "POST", path, "application/x-www-form-urlencoded", []byte(v.Encode()), false)
	if saved == nil {
		saved = acked
	}
	if err == nil && acked(code) && !saved(code) {
		code = -code // answered, not saved: counted as not acknowledged
	}
	ld.note(what, code, err)
	if err == nil && saved(code) {
		ld.led.mu.Lock()
		record(p, time.Now())
		ld.led.acks++
		ld.led.mu.Unlock()
	}
}

func (ld *loader) confirm(ctx context.Context, p *person) {
	ld.form(ctx, "confirm", "/confirm", url.Values{"token": {p.confirmToken}}, p, nil, func(p *person, at time.Time) {
		if p.confirmAck.IsZero() {
			p.confirmAck = at
		}
	})
}

func (ld *loader) unsubscribe(ctx context.Context, p *person) {
	ld.led.mu.Lock()
	p.unsubTried = true
	ld.led.mu.Unlock()
	ld.form(ctx, "unsubscribe", "/preferences", url.Values{"token": {p.prefsToken}, "leave": {"all"}}, p, nil, func(p *person, at time.Time) {
		p.unsubAck = at
	})
}

// preferences renames the person, with the same topics: a write whose
// result the checker can read back, which changes what is due in no way.
func (ld *loader) preferences(ctx context.Context, p *person, n int) {
	name := fmt.Sprintf("Reader %d", n)
	v := url.Values{"token": {p.prefsToken}, "name": {name}, "topics": {"digest", "updates"}, "timezone": {"UTC"}}
	phone := ld.phone(ctx, p, n)
	if phone != "" {
		// Texts for updates too: the events to them go by SMS as well.
		v["channels_shown"] = []string{"1"}
		v["channels"] = []string{"digest:email", "updates:email", "updates:sms"}
	}
	acked := false
	// Saved is the 303 back to the page; a 200 is "You are not
	// subscribed" (an unsubscribe answered 503 had landed): not saved.
	saved := func(code int) bool { return code == http.StatusSeeOther }
	ld.form(ctx, "preferences", "/preferences", v, p, saved, func(p *person, at time.Time) {
		p.name, p.nameAck, acked = name, at, true
		if phone != "" && p.smsOn.IsZero() {
			p.smsOn = at
		}
	})
	if !acked {
		ld.led.mu.Lock()
		p.namesUnacked = append(p.namesUnacked, name)
		ld.led.mu.Unlock()
	}
}

// phone gives the person a number (GB mobiles, one per person) the first
// time, and answers it once acknowledged ("" when it was not).
func (ld *loader) phone(ctx context.Context, p *person, n int) string {
	ld.led.mu.Lock()
	phone := p.phone
	ld.led.mu.Unlock()
	if phone != "" {
		return phone
	}
	number := fmt.Sprintf("+447400%06d", n%1000000)
	body, _ := json.Marshal(map[string]any{"phone": number, "consent_source": "soak"}) // strings: cannot fail
	code, _, _, err := ld.do(ctx, "PUT", "/api/subscribers/"+url.PathEscape(p.email)+"/phone", "application/json", body, true)
	ld.note("phone", code, err)
	if err != nil || !acked(code) {
		return ""
	}
	ld.led.mu.Lock()
	defer ld.led.mu.Unlock()
	p.phone = number
	ld.led.acks++
	return number
}

func (ld *loader) event(ctx context.Context, p *person, n int) {
	title, link := fmt.Sprintf("Event %d", n), "https://example.com/e/"+fmt.Sprint(n)
	body, _ := json.Marshal(map[string]any{"email": p.email, "title": title, "url": link})
	t0 := time.Now()
	code, raw, _, err := ld.do(ctx, "POST", "/api/events", "application/json", body, true)
	ld.note("event", code, err)
	if err != nil || !acked(code) {
		return
	}
	ld.led.mu.Lock()
	defer ld.led.mu.Unlock()
	ld.led.acks++
	if strings.Contains(string(raw), `"queued"`) {
		if p.eventAcks == 0 {
			p.firstEvent = time.Now()
		}
		p.eventAcks++
		if !p.smsOn.IsZero() && p.smsOn.Before(t0) {
			p.texts = append(p.texts, title+" "+link)
		}
	}
}

// sendIssue drafts an issue to the updates topic and sends it now. The
// send is tried up to three times: a 503 (too few replicas had the
// write, during a failover) is answered to be retried.
func (ld *loader) sendIssue(ctx context.Context) {
	subject := fmt.Sprintf("Soak %s issue %d", ld.run, time.Now().UnixNano())
	body, _ := json.Marshal(map[string]any{"subject": subject, "preheader": "", "body": "Hello from the soak.", "topics": []string{"updates"}})
	code, raw, _, err := ld.do(ctx, "POST", "/api/issues", "application/json", body, true)
	ld.note("issue", code, err)
	var created struct {
		ID json.Number `json:"id"`
	}
	if err != nil || !acked(code) || json.Unmarshal(raw, &created) != nil || created.ID == "" {
		return
	}
	for range 3 {
		code, _, _, err = ld.do(ctx, "POST", "/api/issues/"+created.ID.String()+"/send", "application/json", []byte(`{}`), true)
		ld.note("issue send", code, err)
		if err == nil && acked(code) {
			ld.led.mu.Lock()
			ld.led.issues = append(ld.led.issues, issue{id: created.ID.String(), subject: subject, sentAck: time.Now()})
			ld.led.acks++
			ld.led.mu.Unlock()
			return
		}
		time.Sleep(time.Second)
	}
}
