package mailer

import "hash"

// Signer signs a composed mail: channels/email's DKIM satisfies it. The
// signing lives with the transport that owns DKIM; mailer, which imports
// only leaves, names just the two methods composing needs.
type Signer interface {
	// BodyHash returns a fresh hash of a body as the signatures take it
	// (relaxed SHA-256): a prepared mail's goes on from a copy of its
	// template's shared beginning (encode.go).
	BodyHash() hash.Cloner
	// SignHashed returns the DKIM-Signature fields, each ending in CRLF,
	// for a message with header (its fields) whose body hashed to bh.
	SignHashed(header, bh []byte) ([]byte, error)
}

// bodyHash is the Signer's hash of a whole body.
func bodyHash(s Signer, body []byte) []byte {
	h := s.BodyHash()
	h.Write(body) // a hash's Write never fails
	return h.Sum(nil)
}
