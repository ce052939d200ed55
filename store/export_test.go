package store

import "github.com/redis/go-redis/v9"

// Scripts are the store's Lua scripts by their variable names, for the
// tests of package store_test that name a script by its SHA1
// (slots_test.go checks that every script variable is here).
var Scripts = map[string]*redis.Script{
	"addItemScript":         addItemScript,
	"addPushScript":         addPushScript,
	"addWebhookScript":      addWebhookScript,
	"advanceIssueScript":    advanceIssueScript,
	"advanceRunScript":      advanceRunScript,
	"checkVersionScript":    checkVersionScript,
	"claimScript":           claimScript,
	"claimSharedScript":     claimSharedScript,
	"confirmScript":         confirmScript,
	"createIssueScript":     createIssueScript,
	"createTokenScript":     createTokenScript,
	"digestIssueScript":     digestIssueScript,
	"endScript":             endScript,
	"eraseScript":           eraseScript,
	"feedbackScript":        feedbackScript,
	"finishIssueScript":     finishIssueScript,
	"getByIDScript":         getByIDScript,
	"getScript":             getScript,
	"giveBackHoldScript":    giveBackHoldScript,
	"outboxDoneScript":      outboxDoneScript,
	"renameScript":          renameScript,
	"unpointScript":         unpointScript,
	"audienceScript":        audienceScript,
	"countFeedbackScript":   countFeedbackScript,
	"addIndexScript":        addIndexScript,
	"liftScript":            liftScript,
	"revokeTokenScript":     revokeTokenScript,
	"saveFeedScript":        saveFeedScript,
	"startRunScript":        startRunScript,
	"statsScript":           statsScript,
	"subscribeScript":       subscribeScript,
	"takeHoldScript":        takeHoldScript,
	"topicsScript":          topicsScript,
	"transitionIssueScript": transitionIssueScript,
	"updateIssueScript":     updateIssueScript,
	"webhookFailedScript":   webhookFailedScript,
	"webhookStateScript":    webhookStateScript,
}
