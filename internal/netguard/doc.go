// Package netguard keeps outgoing requests to addresses that people or
// admins typed in (webhook endpoints, web-push endpoints) away from this
// machine and its private network. A URL is checked when it is registered
// and again at connect time, because a name that resolved to a public
// address at registration can resolve to 127.0.0.1 a minute later (DNS
// rebinding): the dialer's Control hook sees the address actually dialled.
package netguard
