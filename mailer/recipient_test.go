package mailer

import (
	"context"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/channels/email/smtptest"
)

// TestUnwritableNameQuotesNothing: a name no To header can carry fails
// the mail for good, and the error (which reaches the logs and the
// task's last error) quotes neither the name nor the address.
func TestUnwritableNameQuotesNothing(t *testing.T) {
	srv := smtptest.Start(t)
	m := newTestSMTP(t, srv, 1)
	msg := testMessage("john.smith=work@example.org")
	msg.ToName = "Zoë\x00Quinn"
	err := m.Send(context.Background(), msg)
	se := email.AsSendError(err)
	if se == nil || se.Class != email.Invalid || se.Domain != "example.org" {
		t.Fatalf("%v, want an invalid message for example.org", err)
	}
	for _, leak := range []string{"Zo", "Quinn", "john", "smith", "work"} {
		if strings.Contains(err.Error(), leak) {
			t.Fatalf("the error quotes %q: %v", leak, err)
		}
	}
	if !strings.Contains(err.Error(), "name") {
		t.Fatalf("the error does not say the name is what is wrong: %v", err)
	}
}
