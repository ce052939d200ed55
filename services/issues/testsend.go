package issues

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/ratelimit"
)

// MaxTestEmails is the most addresses one test send reaches.
const MaxTestEmails = 10

// DefaultTestSendsPerMinute is how many test sends one account may make a
// minute: enough to check a change, too few to mail strangers with.
const DefaultTestSendsPerMinute = 5

// ErrTestRecipient is a test send to an address that is neither an
// account of the console nor one of NEWSLETTER_TEST_RECIPIENTS or the
// settings' test_recipients (403): a test send is no way to mail people
// who never asked for it.
var ErrTestRecipient = errors.New("test sends go only to the console's own accounts, NEWSLETTER_TEST_RECIPIENTS and the team test list in the settings (test_recipients)")

// TestRateError is a test send over the account's allowance (429).
type TestRateError struct{ RetryAfter time.Duration }

func (e *TestRateError) Error() string {
	return fmt.Sprintf("at most %d test sends a minute; try again in %s", DefaultTestSendsPerMinute, e.RetryAfter.Round(time.Second))
}

// TestGate decides who a test send may reach, and how often.
type TestGate struct {
	// Recipients are the addresses any test send may reach
	// (NEWSLETTER_TEST_RECIPIENTS), normalised.
	Recipients []string
	// Now is the clock of the allowance (time.Now when nil).
	Now func() time.Time

	once  sync.Once
	limit *ratelimit.Limiter
}

// NewTestGate is a gate for the comma-separated list of addresses raw
// (NEWSLETTER_TEST_RECIPIENTS); a bad address is an error naming it.
func NewTestGate(raw string) (*TestGate, error) {
	g := &TestGate{}
	for _, a := range strings.Split(raw, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		n, err := address.Normalize(a)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", a, err)
		}
		g.Recipients = append(g.Recipients, n)
	}
	return g, nil
}

// CheckTestEmails is the one check of a test send's addresses: 1 to
// MaxTestEmails addresses, each normalised, each once, or an *InputError.
func CheckTestEmails(emails []string) ([]string, error) {
	if len(emails) == 0 || len(emails) > MaxTestEmails {
		return nil, bad("emails: 1 to %d addresses", MaxTestEmails)
	}
	out := make([]string, 0, len(emails))
	for _, e := range emails {
		n, err := address.Normalize(e)
		if err != nil {
			return nil, bad("emails: %q: %v", e, err)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// Offered are the addresses a test send by account may reach without
// typing them: its own (an account named by its address), then
// Recipients, then team (the settings' test_recipients), each once.
func (g *TestGate) Offered(account string, team []string) []string {
	var out []string
	if self, err := address.Normalize(account); err == nil {
		out = append(out, self)
	}
	for _, a := range slices.Concat(g.Recipients, team) {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// Allow checks a test send by the account named account (a token's name;
// an account named by its address may test-send to itself) to emails
// (checked by CheckTestEmails), which may reach Recipients and team (the
// settings' test_recipients, normalised when saved) besides:
// ErrTestRecipient names the first address it may not reach, a
// *TestRateError an account over its allowance. Only an allowed send
// counts against the allowance.
func (g *TestGate) Allow(account string, emails, team []string) error {
	self, _ := address.Normalize(account)
	for _, e := range emails {
		if e != self && !slices.Contains(g.Recipients, e) && !slices.Contains(team, e) {
			return fmt.Errorf("%s: %w", e, ErrTestRecipient)
		}
	}
	g.once.Do(func() {
		now := g.Now
		if now == nil {
			now = time.Now
		}
		g.limit = ratelimit.New(DefaultTestSendsPerMinute, time.Minute, now)
	})
	if ok, wait := g.limit.Allow(account); !ok {
		return &TestRateError{RetryAfter: wait}
	}
	return nil
}
