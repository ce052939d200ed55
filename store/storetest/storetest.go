// Package storetest is the store's contract: one suite of tests of what
// every caller relies on, run on the Redis store (over Redis or miniredis).
package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/store"
)

// Harness is the store under test.
type Harness struct {
	// New returns an empty store. The suite's tests run one after the
	// other, so New may hand out the same flushed database each time.
	New func(t *testing.T) store.Store
}

// Run runs the whole contract against h, one sub-test per behaviour.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness, s store.Store)
	}{
		{"SubscribeConfirmUnsubscribe", testSubscribeConfirmUnsubscribe},
		{"SubscribeAnswersWhatItStored", testSubscribeAnswersWhatItStored},
		{"ActivateAtOnceAndBounce", testActivateAtOnceAndBounce},
		{"Outbox", testOutbox},
		{"Marks", testMarks},
		{"BatchClaims", testBatchClaims},
		{"ConfirmHold", testConfirmHold},
		{"ClaimExpires", testClaimExpires},
		{"ConcurrentSubscribeUnsubscribe", testConcurrentSubscribeUnsubscribe},
		{"DigestRunOnceWithItsItems", testDigestRunOnceWithItsItems},
		{"KeysetWalkAndOutcomes", testKeysetWalkAndOutcomes},
		{"AudienceByShard", testAudienceByShard},
		{"ImportNeverResubscribes", testImportNeverResubscribes},
		{"ClaimOwnerTakesOver", testClaimOwnerTakesOver},
		{"FeedbackPolicy", testFeedbackPolicy},
		{"SuppressionsListAndLift", testSuppressionsListAndLift},
		{"SuppressedSignup", testSuppressedSignup},
		{"SuppressedSignupCancelledAndLifted", testSuppressedSignupCancelledAndLifted},
		{"HoldsKeyOnTheMailbox", testHoldsKeyOnTheMailbox},
		{"HoldGivenBack", testHoldGivenBack},
		{"Topics", testTopics},
		{"SuppressedHaveNoTopics", testSuppressedHaveNoTopics},
		{"Feeds", testFeeds},
		{"FeedPosts", testFeedPosts},
		{"SentMarks", testSentMarks},
		{"PushSubscriptions", testPushSubscriptions},
		{"Devices", testDevices},
		{"DeviceMovesToNewestOwner", testDeviceMovesToNewestOwner},
		{"Phones", testPhones},
		{"PhoneCodes", testPhoneCodes},
		{"SMSCallbacks", testSMSCallbacks},
		{"Channels", testChannels},
		{"Tags", testTags},
		{"Fields", testFields},
		{"Segments", testSegments},
		{"SegmentsMatchBruteForce", testSegmentsMatchBruteForce},
		{"PersonOrder", testPersonOrder},
		{"Issues", testIssues},
		{"IssueVersionsAndDelete", testIssueVersionsAndDelete},
		{"ItemEditAndDelete", testItemEditAndDelete},
		{"WebhookDeliveries", testWebhookDeliveries},
		{"Webhooks", testWebhooks},
		{"WebhookFailures", testWebhookFailures},
		{"IssueTransitionWritesOutbox", testIssueTransitionWritesOutbox},
		{"Tokens", testTokens},
		{"Accounts", testAccounts},
		{"AccountGuard", testAccountGuard},
		{"InviteRevoke", testInviteRevoke},
		{"Settings", testSettings},
		{"Audit", testAudit},
		{"DigestIssue", testDigestIssue},
		{"IssueAdvanceOnce", testIssueAdvanceOnce},
		{"IssueWritesCompareAndSet", testIssueWritesCompareAndSet},
		{"IssueAudience", testIssueAudience},
		{"EndSaysWhetherItEnded", testEndSaysWhetherItEnded},
		{"ListSubscribers", testListSubscribers},
		{"PersonalData", testPersonalData},
		{"Erase", testErase},
		{"Stats", testStats},
		{"Search", testSearch},
		{"ListBothWays", testListBothWays},
		{"AdminAddAndChange", testAdminAddAndChange},
		{"Select", testSelect},
		{"Engagement", testEngagement},
		{"EngagementPerPerson", testEngagementPerPerson},
		{"EventEngagement", testEventEngagement},
		{"Growth", testGrowth},
		{"IssueUnsubscribes", testIssueUnsubscribes}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h, h.New(t)) })
	}
}

// claimOne claims a single mark.
func claimOne(ctx context.Context, s store.Marks, m store.Mark, ttl time.Duration) (store.Claim, error) {
	claims, err := s.ClaimMarks(ctx, "", []store.Mark{m}, ttl)
	if err != nil {
		return store.Busy, err
	}
	if len(claims) != 1 {
		return store.Busy, fmt.Errorf("one mark claimed, %d answers", len(claims))
	}
	return claims[0], nil
}

func entry(id string) outbox.Entry {
	return outbox.Entry{ID: id, Due: time.Now().Add(-time.Minute), Body: []byte("task " + id)}
}

// must fails the test on a set-up step's error.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// must2 is must for a step that also returns a value, which set-up
// ignores: must2(t)(s.Subscribe(...)).
func must2(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		must(t, err)
	}
}
