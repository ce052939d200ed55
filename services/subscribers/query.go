package subscribers

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
)

// DefaultSubscriberPage is the page size of GET /api/subscribers without
// a limit.
const DefaultSubscriberPage = 50

// ParseSearchQuery reads a search's query string (q, status, topic,
// after, before, limit; the API's and the console's).
func ParseSearchQuery(v url.Values, set *topics.Set) (store.SearchQuery, error) {
	base := url.Values{"status": v["status"], "topic": v["topic"], "limit": v["limit"]}
	lq, err := ParseSubscriberQuery(base, set)
	if err != nil {
		return store.SearchQuery{}, err
	}
	q := store.SearchQuery{Q: v.Get("q"), Status: lq.Status, Topic: lq.Topic, After: v.Get("after"), Before: v.Get("before"), Limit: lq.Limit}
	if len(q.Q) > store.MaxSearchQuery {
		return q, fmt.Errorf("q: at most %d characters", store.MaxSearchQuery)
	}
	return q, nil
}

// ParseSubscriberQuery reads a subscriber list's query string (status,
// topic, after, limit; the API's and the console's); its error says what
// is wrong with it, for a 400.
func ParseSubscriberQuery(v url.Values, set *topics.Set) (q store.SubscriberQuery, err error) {
	q = store.SubscriberQuery{Status: store.Status(v.Get("status")), Topic: v.Get("topic"), Limit: DefaultSubscriberPage}
	if q.Status != "" && !q.Status.Valid() {
		names := make([]string, len(store.Statuses))
		for i, st := range store.Statuses {
			names[i] = string(st)
		}
		return q, fmt.Errorf("unknown status %q: want one of %s", q.Status, strings.Join(names, ", "))
	}
	if _, ok := set.Topic(q.Topic); q.Topic != "" && !ok {
		return q, fmt.Errorf("unknown topic %q: want one of %s", q.Topic, strings.Join(set.IDs(), ", "))
	}
	if a := v.Get("after"); a != "" {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil || n < 0 {
			return q, errors.New("after: want the id of the previous page's last subscriber (a whole number, 0 or more)")
		}
		q.After = n
	}
	if b := v.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 1 || q.After > 0 {
			return q, errors.New("before: want the id of the next page's first subscriber (a whole number), and no after")
		}
		q.Before = n
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > store.MaxSubscriberPage {
			return q, fmt.Errorf("limit: want 1 to %d", store.MaxSubscriberPage)
		}
		q.Limit = n
	}
	return q, nil
}
