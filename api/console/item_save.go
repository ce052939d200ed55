package console

import (
	"net/http"
	"net/url"

	"github.com/newsletter/newsletter/store"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
)

// saveItem is POST /admin/items: store.CheckItem and the store's AddItem,
// as POST /api/items.
func (h *Handler) saveItem(w http.ResponseWriter, r *http.Request) {
	f, err := form.NewItem(w, r)
	if err != nil {
		h.items(w, r, form.Status(err), f, err.Error())
		return
	}
	if _, ok := h.cfg.Topics.Current().Topic(f.Topic); !ok {
		h.items(w, r, http.StatusBadRequest, f, "topic: one of the topics file's")
		return
	}
	it, err := store.CheckItem(f.Item())
	if err != nil {
		h.items(w, r, http.StatusBadRequest, f, err.Error())
		return
	}
	it, err = h.d.Store.AddItem(r.Context(), it)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.ItemAdded, "item:"+itoa(it.ID), it.Title)
	done(w, r, "/admin/items?topic="+url.QueryEscape(it.Topic), "item")
}
