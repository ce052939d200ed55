// Package nettest gives tests an address that refuses connections and
// stays refusing for the whole test.
//
// Closing a listener to get such an address is not enough: the port is
// free again at once, and on a busy machine the next server a test starts
// (its own, or another package's) may be given it. A webhook test then saw
// its "refused" endpoint answer with the next server's Retry-After.
package nettest
