// Package token signs and verifies the links in mails: a confirm token
// activates a subscription, an unsubscribe token ends it. Each names its
// purpose inside the signed bytes, so one can never stand in for the other.
package token
