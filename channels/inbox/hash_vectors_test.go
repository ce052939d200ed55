package inbox

import "testing"

// The vectors of docs/channels.md ("The signature"): a product's backend
// computes hash with the snippets there (Go, Node, Python), so Hash must
// give exactly these, or every reader's inbox answers 403. The inputs are
// not normalised on purpose: the address is trimmed and lower-cased and its
// domain brought to ASCII (IDNA, non-transitional: ß stays ß) before it is
// signed, as address.Normalize does.
var hashVectors = []struct {
	email, normalised, hash string
}{
	{"Reader@Example.com", "reader@example.com", "2879d97d8b218419e2e3579a773ec61aa34916bdc65746a67e3ef3998157b159"},
	{" ana@example.org ", "ana@example.org", "29872374c17c4ed6e9af0758bca2644b412f172b18a7f401d298a75d63fae415"},
	{"user@Bücher.de", "user@xn--bcher-kva.de", "34632b7ec76947b5778d09feac437bd57bc59d3061dea4b076713be1fe625590"},
	{"max@straße.de", "max@xn--strae-oqa.de", "2672cc2f93731fb2ad34052e54a744e25817aca49c6cdc64b54aadbbbbc6c5c6"},
}

func TestHashVectors(t *testing.T) {
	secret := []byte("s3cret")
	for _, v := range hashVectors {
		got, err := Hash(secret, v.email)
		if err != nil || got != v.hash {
			t.Errorf("Hash(%q, %q) = %q, %v; want %q", secret, v.email, got, err, v.hash)
		}
		// The normalised form is what is signed: it hashes the same.
		if got, err := Hash(secret, v.normalised); err != nil || got != v.hash {
			t.Errorf("Hash(%q, %q) = %q, %v; want %q (as %q)", secret, v.normalised, got, err, v.hash, v.email)
		}
	}
	// Another secret, another hash.
	if got, err := Hash([]byte("other"), hashVectors[0].email); err != nil || got == hashVectors[0].hash {
		t.Errorf("Hash with another secret = %q, %v; want a different hash", got, err)
	}
}

// Addresses the service refuses have no hash: no inbox can be opened with
// them.
func TestHashRefusesInvalid(t *testing.T) {
	for _, email := range []string{"", "   ", "plain", "jürgen@example.com", "Ann <ann@example.com>", "ann@example.com\r\n"} {
		if got, err := Hash([]byte("s3cret"), email); err == nil {
			t.Errorf("Hash(%q) = %q, nil; want an error", email, got)
		}
	}
}
