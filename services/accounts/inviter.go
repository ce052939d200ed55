package accounts

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// InviteStore keeps invites (store.Redis).
type InviteStore interface {
	CreateInvite(ctx context.Context, inv store.Invite) error
}

// Inviter makes invites, for the console, the API and the command alike.
type Inviter struct {
	Store InviteStore
	// Queue mails the invite (the worker's email:invite); nil: nothing
	// is mailed, the caller shows the link (the command).
	Queue tasks.Enqueuer
	// BaseURL is NEWSLETTER_BASE_URL, which the link starts with.
	BaseURL string
	Now     func() time.Time
}

// Invite checks email and role, stores an invite for them made by by,
// valid InviteTTL, and mails its link: the invite and the link (to show
// when nothing mails it). Errors: an *InputError (400), the store's
// (store.ErrAccountExists, store.ErrTooManyAccounts), or the queue's
// (the invite is stored but not mailed: inviting again makes another).
func (iv *Inviter) Invite(ctx context.Context, by adminauth.Principal, email, role string) (store.Invite, string, error) {
	addr, r, err := CheckInvite(email, role)
	if err != nil {
		return store.Invite{}, "", err
	}
	token, hash := NewInviteToken()
	inv := store.Invite{Hash: hash, Email: addr, Role: r, By: by.Name, Expires: iv.Now().Add(InviteTTL).Truncate(time.Millisecond)}
	if err := iv.Store.CreateInvite(ctx, inv); err != nil {
		return store.Invite{}, "", err
	}
	link := strings.TrimRight(iv.BaseURL, "/") + InvitePath + token
	if iv.Queue != nil {
		p := tasks.AccountInvitePayload{Hash: hash, Email: addr, Role: string(r), By: by.Name, Link: link, Expires: inv.Expires}
		if _, err := iv.Queue.EnqueueContext(ctx, tasks.AccountInvite.New(p)); err != nil {
			return inv, link, fmt.Errorf("invite stored, mail not queued: %w", err)
		}
	}
	return inv, link, nil
}
