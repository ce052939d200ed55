package console

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

type itemEditData struct {
	Item store.Item
	Form form.Item
}

// itemOf loads the item of the route's {id}; it answers a bad or unknown
// one itself.
func (h *Handler) itemOf(w http.ResponseWriter, r *http.Request) (store.Item, bool) {
	id, ok := pathID(r, "id")
	if !ok {
		h.notFound(w, r, "item")
		return store.Item{}, false
	}
	it, err := h.d.Store.Item(r.Context(), id)
	if errors.Is(err, store.ErrNoItem) {
		h.notFound(w, r, "item")
		return it, false
	}
	if err != nil {
		h.storeAway(w, r, err)
		return it, false
	}
	return it, true
}

// editItem is GET /admin/items/{id}: the item's form, and its delete
// button.
func (h *Handler) editItem(w http.ResponseWriter, r *http.Request) {
	it, ok := h.itemOf(w, r)
	if !ok {
		return
	}
	h.render(w, r, http.StatusOK, "item", page{Title: it.Title, Section: "items",
		Data: itemEditData{Item: it, Form: form.Item{Title: it.Title, URL: it.URL, Summary: it.Summary, Topic: it.Topic}}})
}

// updateItem is POST /admin/items/{id}: store.CheckItem and the store's
// UpdateItem, as PUT /api/items/{id}.
func (h *Handler) updateItem(w http.ResponseWriter, r *http.Request) {
	it, ok := h.itemOf(w, r)
	if !ok {
		return
	}
	f, err := form.NewItem(w, r)
	if err != nil {
		h.render(w, r, form.Status(err), "item", page{Title: it.Title, Section: "items", Error: err.Error(), Data: itemEditData{Item: it, Form: f}})
		return
	}
	next := it
	next.Title, next.URL, next.Summary = f.Title, f.URL, f.Summary
	next, err = store.CheckItem(next)
	if err != nil {
		h.render(w, r, http.StatusBadRequest, "item", page{Title: it.Title, Section: "items", Error: err.Error(), Data: itemEditData{Item: it, Form: f}})
		return
	}
	next, err = h.d.Store.UpdateItem(r.Context(), next)
	if errors.Is(err, store.ErrNoItem) {
		h.notFound(w, r, "item")
		return
	}
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.ItemUpdated, "item:"+itoa(next.ID), "")
	done(w, r, "/admin/items?topic="+url.QueryEscape(next.Topic), "item-saved")
}

// deleteItem is POST /admin/items/{id}/delete, as DELETE /api/items/{id}.
func (h *Handler) deleteItem(w http.ResponseWriter, r *http.Request) {
	it, ok := h.itemOf(w, r)
	if !ok {
		return
	}
	if err := form.Empty(w, r); err != nil {
		h.errorPage(w, r, form.Status(err), "Not done", err.Error())
		return
	}
	if err := h.d.Store.DeleteItem(r.Context(), it.ID); err != nil && !errors.Is(err, store.ErrNoItem) {
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.ItemDeleted, "item:"+itoa(it.ID), it.Title)
	done(w, r, "/admin/items?topic="+url.QueryEscape(it.Topic), "item-deleted")
}
