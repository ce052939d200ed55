package sms

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"net"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// SignatureHeader is the header in which Twilio signs a callback.
const SignatureHeader = "X-Twilio-Signature"

// ValidSignature reports whether signature (the X-Twilio-Signature
// header) is Twilio's signature of a callback to fullURL (as Twilio was
// told it, scheme, host and query included) with the POST form form,
// under authToken.
//
// Twilio signs the URL followed by every form field's name and value, the
// names in byte order; a name sent more than once contributes each of its
// distinct values in byte order (so Digits=5678&Digits=1234&Digits=1234
// signs Digits1234Digits5678), which is what Twilio's own libraries do and
// what their published test vectors pin. The result is HMAC-SHA1 under the
// auth token, in standard base64. Twilio's libraries also accept the
// signature of the same URL with its default port written out or left
// out (a proxy may have added or dropped it); so does this.
//
// The comparison takes the same time whatever the signature's bytes.
func ValidSignature(authToken, fullURL string, form url.Values, signature string) bool {
	if authToken == "" || signature == "" {
		return false
	}
	got := []byte(signature)
	ok := false
	for _, u := range urlVariants(fullURL) {
		// Every variant is checked, so the time does not say which matched.
		if hmac.Equal(got, []byte(sign(authToken, u, form))) {
			ok = true
		}
	}
	return ok
}

// sign is Twilio's signature of a callback to fullURL with form (see
// ValidSignature).
func sign(authToken, fullURL string, form url.Values) string {
	var b strings.Builder
	b.WriteString(fullURL)
	names := make([]string, 0, len(form))
	for name := range form {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		values := slices.Clone(form[name])
		slices.Sort(values)
		for _, v := range slices.Compact(values) {
			b.WriteString(name)
			b.WriteString(v)
		}
	}
	mac := hmac.New(sha1.New, []byte(authToken))
	mac.Write([]byte(b.String()))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// urlVariants is fullURL as given, and with its scheme's default port
// added when it has no port, or with its port taken out when it has one:
// the URLs Twilio's own validators (twilio-go's RequestValidator,
// twilio-node's validateRequest) try. Twilio has signed callbacks to a
// port of one's own without it, and a callback refused here is a STOP
// lost. The URL alone when it does not parse or has another scheme.
func urlVariants(fullURL string) []string {
	u, err := url.Parse(fullURL)
	if err != nil || u.Host == "" {
		return []string{fullURL}
	}
	defaultPort := map[string]string{"https": "443", "http": "80"}[u.Scheme]
	if defaultPort == "" {
		return []string{fullURL}
	}
	other := *u
	if u.Port() == "" {
		other.Host = net.JoinHostPort(u.Hostname(), defaultPort)
	} else {
		other.Host = u.Hostname()
		if strings.Contains(other.Host, ":") { // IPv6 literal
			other.Host = "[" + other.Host + "]"
		}
	}
	return []string{fullURL, other.String()}
}

// Action is what an inbound message asks of us.
type Action int

// The actions a keyword asks for.
const (
	// None: an ordinary message, no keyword.
	None Action = iota
	// OptOut: stop sending SMS to this number.
	OptOut
	// OptIn: send SMS to this number again.
	OptIn
	// Help: the reader asks what this is and how to stop it.
	Help
)

func (a Action) String() string {
	switch a {
	case OptOut:
		return "opt-out"
	case OptIn:
		return "opt-in"
	case Help:
		return "help"
	default:
		return "none"
	}
}

// keywords are Twilio's default opt-out, opt-in and help words, which the
// gateway itself acts on: reading the same ones keeps our record of a
// number's consent in step with what the gateway will still deliver.
var keywords = map[string]Action{
	"STOP": OptOut, "STOPALL": OptOut, "UNSUBSCRIBE": OptOut, "CANCEL": OptOut,
	"END": OptOut, "QUIT": OptOut, "REVOKE": OptOut, "OPTOUT": OptOut,
	"START": OptIn, "YES": OptIn, "UNSTOP": OptIn,
	"HELP": Help, "INFO": Help,
}

// Keyword reads an inbound message's body: a keyword counts only as the
// whole message, white space around it and case aside ("stop", " Stop\n"
// but not "please stop" nor "stop!"), as Twilio matches them.
func Keyword(body string) Action {
	word := strings.TrimSpace(body)
	for i := 0; i < len(word); i++ {
		if word[i] >= utf8.RuneSelf {
			// Keywords are ASCII; ToUpper would fold "ſtop" into STOP.
			return None
		}
	}
	return keywords[strings.ToUpper(word)]
}
