package email

import "testing"

func TestClassifyReply(t *testing.T) {
	cases := []struct {
		code     int
		enhanced string
		atRcpt   bool
		text     string
		want     Class
	}{
		{0, "", false, "connection reset", Temporary},
		{451, "4.3.0", false, "", Temporary},
		{452, "4.2.2", true, "mailbox full", Temporary},
		{451, "4.7.1", true, "greylisted", Throttled},
		{421, "", false, "too many connections", Throttled},
		{450, "", true, "", Throttled},
		{454, "", false, "throttling", Throttled},
		{454, "", false, "tls not available", Temporary},
		{552, "", true, "", Temporary},
		{552, "5.3.4", false, "too big", Rejected},
		{550, "5.1.1", true, "no such user", Bounced},
		{550, "5.1.10", true, "", Bounced},
		{550, "5.2.1", true, "disabled", Bounced},
		{553, "5.1.3", true, "", Bounced},
		{550, "", true, "", Bounced},
		{550, "", false, "", Rejected},
		{554, "5.7.1", true, "policy", Rejected},
		{535, "5.7.8", false, "auth", Rejected},
		{535, "", false, "auth", Rejected},
		{554, "", false, "transaction failed", Rejected},
	}
	for _, c := range cases {
		if got := classifyReply(c.code, c.enhanced, c.atRcpt, c.text); got != c.want {
			t.Errorf("%d %s rcpt=%v %q: %s, want %s", c.code, c.enhanced, c.atRcpt, c.text, got, c.want)
		}
	}
}

func TestEnhancedFromText(t *testing.T) {
	if got := enhancedFromText("550 5.1.1 <a@b.c>: user unknown"); got != "5.1.1" {
		t.Fatal(got)
	}
	if got := enhancedFromText("250 ok 1.2.3.4"); got != "" {
		t.Fatal(got)
	}
}
