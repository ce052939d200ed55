package presend

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"
)

// A spam rule is one of the SpamAssassin tests our mails were scored on
// that the service can judge of its own mail, without the network or a
// corpus. Its score is the service's own weight, of the order
// SpamAssassin gives the test it is named after; the total is what the
// preview shows, a warning whenever a rule hits (no mail of ours should
// hit any).
type spamRule struct {
	name  string
	score float64
	fix   string
	// hit says whether the rule fires, and what it saw.
	hit func(s spamInput) (bool, string)
}

type spamInput struct {
	subject, text string
	mail, body    *doc
}

// imageOnlyText is the visible text under which a mail with an image is
// "image-only" (SpamAssassin's HTML_IMAGE_ONLY_* tests count from a few
// hundred bytes of text up).
const imageOnlyText = 400

var spamRules = []spamRule{
	{name: "MIME_HTML_ONLY", score: 1.0, fix: "Give the mail a text part: the issue template's .txt must render the body (mailer/templates/issue.txt).",
		hit: func(s spamInput) (bool, string) { return strings.TrimSpace(s.text) == "", "the mail has no text part" }},
	{name: "HTML_IMAGE_ONLY", score: 1.5, fix: "Write a few sentences beside the images: mail that is mostly pictures looks like spam to filters.",
		hit: imageOnly},
	{name: "URI_TEXT_MISMATCH", score: 1.0, fix: "Let a link's text name the address it leads to, or write words instead of an address as its text.",
		hit: textMismatch},
	{name: "SUBJ_ALL_CAPS", score: 0.5, fix: "Write the subject in sentence case.",
		hit: func(s spamInput) (bool, string) { return allCaps(s.subject), "the subject is in capitals" }},
}

// Spam scores the mail with spamRules: ok with a total of 0, a warning
// naming each rule hit, its score and its fix otherwise.
func Spam(subject, text string, mail, body *doc) Result {
	in := spamInput{subject: subject, text: text, mail: mail, body: body}
	var total float64
	var hits, fixes []string
	for _, r := range spamRules {
		if ok, why := r.hit(in); ok {
			total += r.score
			hits = append(hits, fmt.Sprintf("%s %.1f (%s)", r.name, r.score, why))
			fixes = append(fixes, r.fix)
		}
	}
	if total == 0 {
		return Result{Check: "spam", Level: OK, Message: "Spam-content score 0: no rule the service judges hits."}
	}
	return Result{Check: "spam", Level: Warning,
		Message: fmt.Sprintf("Spam-content score %.1f: %s.", total, strings.Join(hits, "; ")),
		Fix:     strings.Join(fixes, " ")}
}

// imageOnly: the mail has an image and little text beside it.
func imageOnly(s spamInput) (bool, string) {
	n := len(s.body.images)
	if n == 0 || len(s.body.text) >= imageOnlyText {
		return false, ""
	}
	return true, fmt.Sprintf("%d image(s) and %d characters of text", n, len(s.body.text))
}

// textMismatch: a link whose text is an address on another host than
// the one it leads to (what phishing does).
func textMismatch(s spamInput) (bool, string) {
	var bad []string
	for _, l := range s.body.links {
		shown := shownHost(l.text)
		if shown == "" {
			continue
		}
		u, err := url.Parse(l.href)
		if err != nil || u.Hostname() == "" {
			continue
		}
		if !sameSite(shown, strings.ToLower(u.Hostname())) {
			bad = append(bad, fmt.Sprintf("%q leads to %s", clip(l.text, 60), u.Hostname()))
		}
	}
	if len(bad) == 0 {
		return false, ""
	}
	return true, strings.Join(firstN(bad, 3), ", ")
}

// shownHost is the host a link's text shows ("https://a.example/x",
// "www.a.example"), "" when the text is words.
func shownHost(text string) string {
	t := strings.ToLower(strings.TrimSpace(text))
	if strings.ContainsAny(t, " \t") {
		return ""
	}
	if !strings.HasPrefix(t, "http://") && !strings.HasPrefix(t, "https://") {
		if !strings.HasPrefix(t, "www.") {
			return ""
		}
		t = "http://" + t
	}
	u, err := url.Parse(t)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// sameSite: b is a or a's parent or child domain, www. aside.
func sameSite(a, b string) bool {
	a, b = strings.TrimPrefix(a, "www."), strings.TrimPrefix(b, "www.")
	return a == b || strings.HasSuffix(a, "."+b) || strings.HasSuffix(b, "."+a)
}

// allCaps: the subject has at least 4 letters and none in lower case.
func allCaps(s string) bool {
	letters := 0
	for _, r := range s {
		if unicode.IsLower(r) {
			return false
		}
		if unicode.IsUpper(r) {
			letters++
		}
	}
	return letters >= 4
}
