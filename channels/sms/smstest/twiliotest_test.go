package smstest_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/channels/sms/smstest"
)

// TestSignatureVectors holds the fake's signer to the vectors Twilio's
// libraries publish (twilio-php's RequestValidatorTest).
func TestSignatureVectors(t *testing.T) {
	u := "https://mycompany.com/myapp.php?foo=1&bar=2"
	form := url.Values{"CallSid": {"CA1234567890ABCDE"}, "Caller": {"+14158675309"}, "Digits": {"1234"},
		"From": {"+14158675309"}, "To": {"+18005551212"}}
	if got := smstest.Signature("12345", u, form); got != "RSOYDt4T1cUTdK1PDd93/VVr8B8=" {
		t.Errorf("documented example: %s", got)
	}
	repeated := url.Values{"Sid": {"CA123"}, "SidAccount": {"AC123"}, "Digits": {"5678", "1234", "1234"}}
	if got := smstest.Signature("12345", u, repeated); got != "IK+Dwps556ElfBT0I3Rgjkr1wJU=" {
		t.Errorf("repeated field: %s", got)
	}
}

// TestChecks covers what sms.Client never sends: the fake must refuse it.
func TestChecks(t *testing.T) {
	f := smstest.New(t)
	path := f.URL + "/2010-04-01/Accounts/" + f.AccountSID + "/Messages.json"
	for _, c := range []struct {
		name, url, method string
		form              url.Values
		status, code      int
	}{
		{"both senders", path, "POST", url.Values{"To": {"+447400123456"}, "From": {"+15005550006"},
			"MessagingServiceSid": {"MG1"}, "Body": {"hi"}}, 400, 21603},
		{"no sender", path, "POST", url.Values{"To": {"+447400123456"}, "Body": {"hi"}}, 400, 21603},
		{"From not E.164", path, "POST", url.Values{"To": {"+447400123456"}, "From": {"5005550006"}, "Body": {"hi"}}, 400, 21603},
		{"another account", strings.Replace(path, f.AccountSID, "AC0", 1), "POST",
			url.Values{"To": {"+447400123456"}, "From": {"+15005550006"}, "Body": {"hi"}}, 404, 20404},
		{"GET", path, "GET", nil, 405, 20004},
	} {
		req, err := http.NewRequest(c.method, c.url, strings.NewReader(c.form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(f.AccountSID, f.AuthToken)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var answer struct{ Code, Status int }
		err = json.NewDecoder(resp.Body).Decode(&answer)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != c.status || answer.Status != c.status || answer.Code != c.code {
			t.Errorf("%s: %d %+v (%v), want %d code %d", c.name, resp.StatusCode, answer, err, c.status, c.code)
		}
	}
	if n := len(f.Messages()); n != 0 {
		t.Errorf("the fake took %d bad messages", n)
	}
}
