// Package engage is the counted redirect: the links in issues (and so in
// digests, which are issues) and a topic event's link (under the event's
// engagement id, an issue id no issue has: store.EventEngagement) go
// through GET /r/{token}, which counts the click in aggregate and
// redirects to the link's target; with opens on, a pixel at GET
// /o/{token} counts opens.
//
// What is counted, and what is not (docs/publishing.md, "What is
// counted"): per link, how often it was followed and by how many distinct
// readers (a Redis HyperLogLog of a keyed hash of the reader's id, never
// the id); per issue, the same by hour. Link scanners and mail-privacy
// proxies are counted apart, as machine clicks and opens, never as
// readers. Nobody's own history is kept unless NEWSLETTER_ENGAGEMENT is
// per-person.
//
// A token is two signed parts (token.go): the link's (which issue, which
// link, shared by every reader of the issue) and the reader's (who, and
// when the mail was made, shared by every link of their mail). The target
// is never in the token: it is the stored link of that index, so
// a token we did not sign redirects nowhere.
//
// The redirect does not wait on Redis (recorder.go): counts go into a
// bounded buffer that a goroutine writes in batches.
package engage
