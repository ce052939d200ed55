package issues

import (
	"context"
	"errors"
	"strings"

	"github.com/newsletter/newsletter/store"
)

// The bounds of a search over issues (docs/security.md lists them).
const (
	// MaxQuery is the longest query, in bytes; MaxQueryWords the most
	// words it may have.
	MaxQuery      = 200
	MaxQueryWords = 8
	// SearchScan is how many of the newest issues a search reads: the
	// issues are few (a publisher writes one a week or a day), so they
	// are scanned in Go, not indexed in Redis; an older one is found by
	// paging the list.
	SearchScan = 1000
	searchPage = 100
	// SearchesAtOnce is how many searches one process runs at a time; one
	// more is ErrSearchBusy at once. A search reads whole issues (bodies
	// up to 512 KB), so eight at once cost the probe's server over a
	// gigabyte; two cost at most a fifth of that.
	SearchesAtOnce = 2
)

// ErrSearchBusy: SearchesAtOnce searches are running in this process.
var ErrSearchBusy = errors.New("other searches of the issues are running; try again in a moment")

// searching holds a slot per running search, for the whole process.
var searching = make(chan struct{}, SearchesAtOnce)

// SearchWords are a query's words, lower case, checked against the
// bounds: an *InputError when it is too long or has too many.
func SearchWords(q string) ([]string, error) {
	if len(q) > MaxQuery {
		return nil, bad("q: at most %d bytes (%d given)", MaxQuery, len(q))
	}
	words := strings.Fields(strings.ToLower(q))
	if len(words) > MaxQueryWords {
		return nil, bad("q: at most %d words", MaxQueryWords)
	}
	return words, nil
}

// Matches tells whether every word is in the issue's subject,
// preheader, body or slug (case-insensitive, anywhere in a word).
func Matches(is store.Issue, words []string) bool {
	text := strings.ToLower(is.Subject + "\n" + is.Preheader + "\n" + is.Slug + "\n" + is.Body)
	for _, w := range words {
		if !strings.Contains(text, w) {
			return false
		}
	}
	return true
}

// Search is up to limit issues of status ("": any but trashed;
// store.IssueTrashed: the trash) with every word (SearchWords), newest
// first, among the SearchScan newest of that status.
func (s *Service) Search(ctx context.Context, status string, words []string, limit int) ([]store.Issue, error) {
	select {
	case searching <- struct{}{}:
		defer func() { <-searching }()
	default:
		return nil, ErrSearchBusy
	}
	out := []store.Issue{}
	after := int64(0)
	for scanned := 0; scanned < SearchScan && len(out) < limit; {
		page, err := s.Store.ListIssues(ctx, status, after, min(searchPage, SearchScan-scanned))
		if err != nil {
			return nil, err
		}
		for _, is := range page {
			if Matches(is, words) && len(out) < limit {
				out = append(out, is)
			}
		}
		scanned += len(page)
		if len(page) < searchPage {
			break
		}
		after = page[len(page)-1].ID
	}
	return out, nil
}
