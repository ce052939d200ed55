package email

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"

	"github.com/newsletter/newsletter/internal/address"
)

// SES defaults.
const (
	// DefaultSESAttempts is how many times the SDK tries one send (the
	// first and two retries) on throttling, a 5xx or a dropped connection,
	// with its own exponential backoff and jitter.
	DefaultSESAttempts = 3
	// DefaultSESMaxBackoff caps the SDK's wait between two tries: a worker
	// slot is held meanwhile, and a longer wait is the task retry's job.
	DefaultSESMaxBackoff = 5 * time.Second
	// DefaultSESPause is how long a sending pause holds mail before the
	// next send asks SES again.
	DefaultSESPause = 5 * time.Minute
)

// SESOptions configure the Amazon SES transport.
type SESOptions struct {
	Region string
	// Endpoint replaces the region's API address (tests, VPC endpoints).
	Endpoint string
	// Credentials replace the SDK's default chain (environment, shared
	// files, web identity, container and instance roles).
	Credentials aws.CredentialsProvider
	// Conns is the most idle connections kept to the API (default 16): as
	// many as mails are sent at once.
	Conns int
	// Timeout bounds one HTTP attempt (default 30s), so a hung API delays
	// the mail instead of holding the worker.
	Timeout time.Duration
	// MaxAttempts and MaxBackoff configure the SDK's retries
	// (DefaultSESAttempts, DefaultSESMaxBackoff).
	MaxAttempts int
	MaxBackoff  time.Duration
	// PauseFor is how long a sending pause holds mail (DefaultSESPause).
	PauseFor time.Duration
}

// SES sends raw MIME through the Amazon SES v2 API (SendEmail with
// Content.Raw): the message goes out with our headers and DKIM signature
// as composed. It takes a composed mail as SMTP does (SendRaw); the
// worker's mailer composes in front of it.
//
// SES decides the SMTP envelope sender itself (its own bounce domain, or
// the identity's custom MAIL FROM domain), so the VERP return path goes in
// FeedbackForwardingEmailAddress: SES forwards bounces and complaints to
// it, and the bounce intake reads the tag from it as from any bounce.
type SES struct {
	client   *sesv2.Client
	pauseFor time.Duration
	// pausedUntil (Unix nanoseconds) holds every send after a pause
	// answer, without asking SES, until the next probe.
	pausedUntil atomic.Int64
	now         func() time.Time
}

// NewSES loads the AWS configuration (credentials from the default chain
// unless o.Credentials is set) and checks that credentials are there, so
// a missing role fails at start-up rather than on every mail.
func NewSES(ctx context.Context, o SESOptions) (*SES, error) {
	if o.Region == "" {
		return nil, errors.New("SES: a region is required")
	}
	if o.Conns <= 0 {
		o.Conns = 16
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultSESAttempts
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultSESMaxBackoff
	}
	if o.PauseFor <= 0 {
		o.PauseFor = DefaultSESPause
	}
	httpClient := awshttp.NewBuildableClient().WithTimeout(o.Timeout).WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConnsPerHost = o.Conns
	})
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(o.Region),
		awsconfig.WithHTTPClient(httpClient),
		awsconfig.WithRetryer(func() aws.Retryer {
			// The standard retryer: throttling (TooManyRequestsException,
			// LimitExceededException, Throttling) waits 1s, 2s, … with
			// jitter; its token bucket stops retrying when most calls
			// fail, and the task's own retry takes over.
			return retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts, so.MaxBackoff = o.MaxAttempts, o.MaxBackoff
			})
		}),
	}
	if o.Credentials != nil {
		opts = append(opts, awsconfig.WithCredentialsProvider(o.Credentials))
	}
	if o.Endpoint != "" {
		opts = append(opts, awsconfig.WithBaseEndpoint(o.Endpoint))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	if cfg.Credentials == nil {
		return nil, errors.New("no AWS credentials")
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return nil, fmt.Errorf("no AWS credentials from the default chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, web identity, container or instance role): %w", err)
	}
	return &SES{client: sesv2.NewFromConfig(cfg), pauseFor: o.PauseFor, now: time.Now}, nil
}

// RewritesHeaders names the headers SES changes, so that the composer's
// DKIM signatures leave them out (DKIM.WithoutHeaders): SES replaces Date and
// Message-ID with its own ("Amazon SES header fields"), and writes its
// own Feedback-ID (its feedback loop's stream id) and X-SES-Outgoing into
// every mail it sends. A signature covering one of them, or signing its
// absence (DKIMHeaders oversigns Feedback-ID), fails after SES.
func (s *SES) RewritesHeaders() []string {
	return []string{"Date", "Message-ID", "Feedback-ID", "X-SES-Outgoing"}
}

// SendRaw sends a composed mail: one SendEmail call with the message as
// it is, to the one recipient to (the envelope, whatever the header
// says), with bounces and complaints forwarded to from.
func (s *SES) SendRaw(ctx context.Context, from, to string, data []byte) error {
	_, err := s.send(ctx, from, to, data)
	return err
}

// send is SendRaw answering the id SES gave the accepted mail (its
// MessageId, which its notifications name the mail by).
func (s *SES) send(ctx context.Context, from, to string, data []byte) (string, error) {
	domain := address.Domain(to)
	if until := s.pausedUntil.Load(); until != 0 {
		if wait := time.Unix(0, until).Sub(s.now()); wait > 0 {
			// asynq schedules in whole seconds: a shorter wait would
			// bring the task straight back.
			wait = max(wait, time.Second)
			return "", &SendError{Class: Temporary, Domain: domain, RetryAfter: wait,
				Err: &PausedError{Reason: "Amazon SES paused sending for this account; held until the next try", In: wait}}
		}
	}
	out, err := s.client.SendEmail(ctx, &sesv2.SendEmailInput{
		Content:                        &types.EmailContent{Raw: &types.RawMessage{Data: data}},
		Destination:                    &types.Destination{ToAddresses: []string{to}},
		FeedbackForwardingEmailAddress: aws.String(from),
	})
	if err == nil {
		s.pausedUntil.Store(0)
		return aws.ToString(out.MessageId), nil
	}
	se := classifySES(err, domain)
	if pe := AsPaused(se); pe != nil {
		pe.In = s.pauseFor
		se.RetryAfter = s.pauseFor
		s.pausedUntil.Store(s.now().Add(s.pauseFor).UnixNano())
	}
	return "", se
}

// sesThrottles are the error codes of SES's rate and quota limits. The
// SDK has retried them with backoff already; what is left is temporary.
var sesThrottles = map[string]bool{
	"TooManyRequestsException": true, "LimitExceededException": true,
	"Throttling": true, "ThrottlingException": true,
}

// sesAccountRefusals are the SES answers that refuse our account, not the
// mail: no permission to send (AccessDeniedException: the role's policy
// lacks ses:SendEmail), the identity's MAIL FROM domain not verified.
// Every mail meets them alike until an operator acts (authRefused).
var sesAccountRefusals = map[string]bool{
	"AccessDeniedException": true, "MailFromDomainNotVerifiedException": true,
}

// sesRefusesAccount reports an SES answer of sesAccountRefusals in err's
// chain.
func sesRefusesAccount(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && sesAccountRefusals[ae.ErrorCode()]
}

// classifySES maps an SES answer onto the classes of the SMTP replies.
func classifySES(err error, domain string) *SendError {
	out := &SendError{Class: Temporary, Domain: domain, Err: err}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return out // network, timeout, cancelled, retry quota used up
	}
	switch code := ae.ErrorCode(); {
	case sesThrottles[code]:
		// Our account's rate, not the receiving domain's: Throttled
		// would slow that domain down for nothing.
		out.Class = Temporary
	case code == "SendingPausedException", code == "AccountSendingPausedException", code == "AccountSuspendedException":
		// Every mail would meet the same answer: hold them all (the
		// lane pauses) instead of failing each.
		out.Err = &PausedError{Reason: fmt.Sprintf("Amazon SES: %s: %s", code, ae.ErrorMessage())}
	case code == "MessageRejected", code == "MailFromDomainNotVerifiedException",
		code == "AccessDeniedException", code == "NotFoundException":
		// About the sender, not the address: content refused, an
		// unverified identity (or the sandbox), the MAIL FROM domain,
		// a missing ses:SendEmail permission. An operator must act.
		out.Class = Rejected
	case code == "BadRequestException":
		out.Class = Invalid // the request itself, such as an address SES cannot parse
	}
	return out
}
