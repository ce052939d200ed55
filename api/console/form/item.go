package form

import (
	"net/http"

	"github.com/newsletter/newsletter/store"
)

// Item is the form that adds a digest item.
type Item struct {
	Title, URL, Summary, Topic string
}

// NewItem reads the item form.
func NewItem(w http.ResponseWriter, r *http.Request) (Item, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return Item{}, err
	}
	return Item{Title: value(r, "title"), URL: value(r, "url"), Summary: value(r, "summary"), Topic: value(r, "topic")}, nil
}

// Item is the form's item as the store keeps it.
func (f Item) Item() store.Item {
	return store.Item{Title: f.Title, URL: f.URL, Summary: f.Summary, Topic: f.Topic}
}
