package sms_test

import (
	"net/url"
	"testing"

	"github.com/newsletter/newsletter/channels/sms"
)

// The example of Twilio's request-validation docs, the vector its
// libraries test against (twilio-php's RequestValidatorTest).
const (
	docToken = "12345"
	docURL   = "https://mycompany.com/myapp.php?foo=1&bar=2"
	docSig   = "RSOYDt4T1cUTdK1PDd93/VVr8B8="
)

func docForm() url.Values {
	return url.Values{
		"CallSid": {"CA1234567890ABCDE"},
		"Caller":  {"+14158675309"},
		"Digits":  {"1234"},
		"From":    {"+14158675309"},
		"To":      {"+18005551212"},
	}
}

func TestValidSignatureTwilioVectors(t *testing.T) {
	if !sms.ValidSignature(docToken, docURL, docForm(), docSig) {
		t.Fatal("Twilio's documented example does not validate")
	}
	// twilio-php's vector for a repeated name: its distinct values sorted.
	repeated := url.Values{"Sid": {"CA123"}, "SidAccount": {"AC123"}, "Digits": {"5678", "1234", "1234"}}
	if !sms.ValidSignature(docToken, docURL, repeated, "IK+Dwps556ElfBT0I3Rgjkr1wJU=") {
		t.Error("twilio-php's vector with a repeated field does not validate")
	}
	// Twilio may sign with the default port written out or left out.
	if !sms.ValidSignature(docToken, docURL, docForm(), "kvajT1Ptam85bY51eRf/AJRuM3w=") {
		t.Error("the signature of the URL with :443 added does not validate")
	}
	httpURL := "http://mycompany.com/myapp.php?foo=1&bar=2"
	if !sms.ValidSignature(docToken, httpURL, docForm(), "0ZXoZLH/DfblKGATFgpif+LLRf4=") {
		t.Error("the signature of the http URL with :80 added does not validate")
	}
	if !sms.ValidSignature(docToken, "https://mycompany.com:443/myapp.php?foo=1&bar=2", docForm(), docSig) {
		t.Error("a URL with :443 does not validate the signature of the URL without it")
	}
	// As twilio-go and twilio-node: a URL on a port of its own also takes
	// the signature of the URL without the port.
	if !sms.ValidSignature(docToken, "https://mycompany.com:8443/myapp.php?foo=1&bar=2", docForm(), docSig) {
		t.Error("a URL with :8443 does not validate the signature of the URL without it")
	}
}

func TestValidSignatureRefuses(t *testing.T) {
	tampered := docForm()
	tampered.Set("Digits", "9999")
	extra := docForm()
	extra.Set("Body", "STOP")
	for _, c := range []struct {
		name, token, url string
		form             url.Values
		sig              string
	}{
		{"another token", "54321", docURL, docForm(), docSig},
		{"a changed value", docToken, docURL, tampered, docSig},
		{"an added field", docToken, docURL, extra, docSig},
		{"a changed query", docToken, docURL + "&x=1", docForm(), docSig},
		{"another host", docToken, "https://evil.example/myapp.php?foo=1&bar=2", docForm(), docSig},
		{"http for https", docToken, "http://mycompany.com/myapp.php?foo=1&bar=2", docForm(), docSig},
		{"no signature", docToken, docURL, docForm(), ""},
		{"no token", "", docURL, docForm(), docSig},
		{"garbage", docToken, docURL, docForm(), "not base64 at all"},
	} {
		if sms.ValidSignature(c.token, c.url, c.form, c.sig) {
			t.Errorf("%s: validated", c.name)
		}
	}
}

func TestKeyword(t *testing.T) {
	for body, want := range map[string]sms.Action{
		"STOP": sms.OptOut, "stop": sms.OptOut, "  Stop\n": sms.OptOut, "StopAll": sms.OptOut,
		"UNSUBSCRIBE": sms.OptOut, "cancel": sms.OptOut, "End": sms.OptOut, "quit": sms.OptOut,
		"REVOKE": sms.OptOut, "optout": sms.OptOut,
		"START": sms.OptIn, "yes": sms.OptIn, "Unstop": sms.OptIn,
		"HELP": sms.Help, "info": sms.Help,
		"": sms.None, "please stop": sms.None, "stop!": sms.None, "STOP STOP": sms.None,
		"opt out": sms.None, "ſtop": sms.None, "thanks": sms.None, "yes please": sms.None,
	} {
		if got := sms.Keyword(body); got != want {
			t.Errorf("Keyword(%q) = %s, want %s", body, got, want)
		}
	}
}
