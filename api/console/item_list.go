package console

import (
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
)

// itemsPage is how many items a page lists.
const itemsPage = 50

type itemListData struct {
	Items  []store.Item
	Topic  string
	Topics []topics.Topic
	Form   form.Item
	Next   int64
}

// listItems is GET /admin/items?topic=&after=: a topic's digest items in
// the order they came, and the form that adds one.
func (h *Handler) listItems(w http.ResponseWriter, r *http.Request) {
	h.items(w, r, http.StatusOK, form.Item{}, "")
}

func (h *Handler) items(w http.ResponseWriter, r *http.Request, code int, f form.Item, problem string) {
	q := r.URL.Query()
	topic := q.Get("topic")
	if _, ok := h.cfg.Topics.Current().Topic(topic); !ok {
		topic = topics.Digest
	}
	if f.Topic == "" {
		f.Topic = topic
	}
	after, _ := strconv.ParseInt(q.Get("after"), 10, 64)
	list, err := h.d.Store.ItemsAfter(r.Context(), topic, max(after, 0), itemsPage)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	d := itemListData{Items: list, Topic: topic, Topics: h.cfg.Topics.Current().Topics, Form: f}
	if len(list) == itemsPage {
		d.Next = list[len(list)-1].ID
	}
	h.render(w, r, code, "items", page{Title: "Items", Section: "items", Error: problem, Data: d})
}
