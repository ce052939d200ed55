package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/catalog"
	"github.com/newsletter/newsletter/store"
)

// maxCatalogBody caps a PUT of the topics, the sequence or a template:
// a sequence's Markdown steps or a layout fit well within it.
const maxCatalogBody = 512 << 10

func (s *Server) catalogRoutes() {
	if s.deps.Catalog == nil || s.deps.Templates == nil {
		return
	}
	m := s.mux
	m.Handle("GET /api/topics", s.Viewer(http.HandlerFunc(s.getTopics)))
	m.Handle("POST /api/topics", s.Admin(http.HandlerFunc(s.addTopic)))
	m.Handle("PUT /api/topics", s.Admin(http.HandlerFunc(s.putTopics)))
	m.Handle("GET /api/sequence", s.Viewer(http.HandlerFunc(s.getSequence)))
	m.Handle("PUT /api/sequence", s.Admin(http.HandlerFunc(s.putSequence)))
	m.Handle("GET /api/templates", s.Viewer(http.HandlerFunc(s.listTemplates)))
	m.Handle("GET /api/templates/{name}", s.Viewer(http.HandlerFunc(s.getTemplate)))
	m.Handle("PUT /api/templates/{name}", s.Admin(http.HandlerFunc(s.putTemplate)))
}

// readCatalogBody decodes a JSON body into v (unknown fields refused).
func readCatalogBody(w http.ResponseWriter, r *http.Request, v any) error {
	return readJSONBody(w, r, maxCatalogBody, v)
}

// historic answers ?version=N of what from the history; it reports
// whether it answered.
func (s *Server) historic(w http.ResponseWriter, r *http.Request, what string, show func(store.CatalogChange) any) bool {
	raw := r.URL.Query().Get("version")
	if raw == "" {
		return false
	}
	v, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || v < 1 {
		webjson.Write(w, http.StatusBadRequest, errorBody("version: want a whole number from 1"))
		return true
	}
	hist, err := s.deps.Catalog.History(r.Context(), what, 1000)
	if err != nil {
		s.answerCatalogError(w, what, err)
		return true
	}
	for _, c := range hist {
		if c.Version == v {
			webjson.Write(w, http.StatusOK, show(c))
			return true
		}
	}
	webjson.Write(w, http.StatusNotFound, errorBody(fmt.Sprintf("%s: version %d is not kept (the history keeps the latest saves)", what, v)))
	return true
}

// versionsOf are the saved versions of what, newest first, for GET's
// "history".
func (s *Server) versionsOf(r *http.Request, what string) []map[string]any {
	hist, err := s.deps.Catalog.History(r.Context(), what, 20)
	out := []map[string]any{}
	if err != nil {
		s.deps.Log.Warn("read the catalog's history", "what", what, "err", err)
		return out
	}
	for _, c := range hist {
		out = append(out, map[string]any{"version": c.Version, "at": c.At, "actor": c.Actor})
	}
	return out
}

func (s *Server) getTopics(w http.ResponseWriter, r *http.Request) {
	if s.historic(w, r, "topics", func(c store.CatalogChange) any {
		var set topics.Set
		if err := json.Unmarshal(c.Content, &set); err != nil {
			return map[string]any{"version": c.Version, "error": "unreadable"}
		}
		return map[string]any{"version": c.Version, "at": c.At, "actor": c.Actor, "topics": catalog.TopicsToJSON(&set), "sequence": map[string]any{"topic": set.Sequence.Topic, "steps": catalog.StepsToJSON(set.Sequence)}}
	}) {
		return
	}
	snap := s.deps.Catalog.Snapshot()
	webjson.Write(w, http.StatusOK, map[string]any{"version": snap.Version, "topics": catalog.TopicsToJSON(snap.Set), "history": s.versionsOf(r, "topics")})
}

// addTopic handles POST /api/topics: one new topic, added last.
func (s *Server) addTopic(w http.ResponseWriter, r *http.Request) {
	var in struct {
		catalog.TopicJSON
		Version int64 `json:"version"`
	}
	if err := readCatalogBody(w, r, &in); err != nil {
		s.answerListError(w, "add a topic", err)
		return
	}
	if in.Version == 0 {
		// Adding does not overwrite anyone's change: over the newest.
		latest, err := s.deps.Catalog.Latest(r.Context())
		if err != nil {
			s.answerCatalogError(w, "topics", err)
			return
		}
		in.Version = latest.Version
	}
	snap, err := s.deps.Catalog.At(r.Context(), in.Version)
	if err != nil {
		s.answerCatalogError(w, "topics", err)
		return
	}
	if _, ok := snap.Set.Topic(strings.TrimSpace(in.ID)); ok {
		webjson.Write(w, http.StatusConflict, errorBody(fmt.Sprintf("topic %q exists; change it with PUT /api/topics", in.ID)))
		return
	}
	next := catalog.CloneSet(snap.Set)
	next.Topics = append(next.Topics, catalog.TopicFromJSON(in.TopicJSON))
	saved, ok := s.saveTopics(w, r, next, in.Version, audit.TopicsChanged, "topics", "added "+strings.TrimSpace(in.ID))
	if ok {
		t, _ := saved.Set.Topic(strings.TrimSpace(in.ID))
		webjson.Write(w, http.StatusCreated, map[string]any{"version": saved.Version, "topic": catalog.TopicsToJSON(&topics.Set{Topics: []topics.Topic{t}})[0]})
	}
}

// putTopics handles PUT /api/topics: the whole list (in the order to
// show), over the version read.
func (s *Server) putTopics(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Version *int64              `json:"version"`
		Topics  []catalog.TopicJSON `json:"topics"`
	}
	if err := readCatalogBody(w, r, &in); err != nil {
		s.answerListError(w, "change the topics", err)
		return
	}
	if in.Version == nil {
		webjson.Write(w, http.StatusBadRequest, errorBody("version: the version you read (GET /api/topics), so that nobody's change is lost"))
		return
	}
	snap, err := s.deps.Catalog.At(r.Context(), *in.Version)
	if err != nil {
		s.answerCatalogError(w, "topics", err)
		return
	}
	next := catalog.CloneSet(snap.Set)
	next.Topics = nil
	for _, j := range in.Topics {
		next.Topics = append(next.Topics, catalog.TopicFromJSON(j))
	}
	if saved, ok := s.saveTopics(w, r, next, *in.Version, audit.TopicsChanged, "topics", catalog.ChangedTopics(snap.Set, next)); ok {
		webjson.Write(w, http.StatusOK, map[string]any{"version": saved.Version, "topics": catalog.TopicsToJSON(saved.Set)})
	}
}

func (s *Server) getSequence(w http.ResponseWriter, r *http.Request) {
	if s.historic(w, r, "topics", func(c store.CatalogChange) any {
		var set topics.Set
		if err := json.Unmarshal(c.Content, &set); err != nil {
			return map[string]any{"version": c.Version, "error": "unreadable"}
		}
		return map[string]any{"version": c.Version, "at": c.At, "actor": c.Actor, "topic": set.Sequence.Topic, "steps": catalog.StepsToJSON(set.Sequence)}
	}) {
		return
	}
	snap := s.deps.Catalog.Snapshot()
	webjson.Write(w, http.StatusOK, map[string]any{"version": snap.Version, "topic": snap.Set.Sequence.Topic, "steps": catalog.StepsToJSON(snap.Set.Sequence), "history": s.versionsOf(r, "topics")})
}

// putSequence handles PUT /api/sequence: the topic and the whole list of
// steps, over the version read (the topics' and the sequence's are one).
func (s *Server) putSequence(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Version *int64             `json:"version"`
		Topic   string             `json:"topic"`
		Steps   []catalog.StepJSON `json:"steps"`
	}
	if err := readCatalogBody(w, r, &in); err != nil {
		s.answerListError(w, "change the sequence", err)
		return
	}
	if in.Version == nil {
		webjson.Write(w, http.StatusBadRequest, errorBody("version: the version you read (GET /api/sequence), so that nobody's change is lost"))
		return
	}
	steps, err := catalog.StepsFromJSON(in.Steps)
	if err != nil {
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	snap, err := s.deps.Catalog.At(r.Context(), *in.Version)
	if err != nil {
		s.answerCatalogError(w, "sequence", err)
		return
	}
	next := catalog.CloneSet(snap.Set)
	next.Sequence = topics.Sequence{Topic: strings.TrimSpace(in.Topic), Steps: steps}
	if next.Sequence.Topic == "" {
		next.Sequence.Topic = snap.Set.Sequence.Topic
	}
	if saved, ok := s.saveTopics(w, r, next, *in.Version, audit.SequenceChanged, "sequence", fmt.Sprintf("%d steps", len(steps))); ok {
		webjson.Write(w, http.StatusOK, map[string]any{"version": saved.Version, "topic": saved.Set.Sequence.Topic, "steps": catalog.StepsToJSON(saved.Set.Sequence)})
	}
}

// saveTopics saves next and audits it; it answers a refusal itself.
func (s *Server) saveTopics(w http.ResponseWriter, r *http.Request, next topics.Set, version int64, action, target, detail string) (catalog.Snapshot, bool) {
	saved, err := s.deps.Catalog.SaveTopics(r.Context(), next, version, actorOf(r))
	if err != nil {
		s.answerCatalogError(w, target, err)
		return saved, false
	}
	s.note(r, action, target, fmt.Sprintf("%s (version %d)", detail, saved.Version))
	return saved, true
}

// answerCatalogError answers a refused or failed save.
func (s *Server) answerCatalogError(w http.ResponseWriter, what string, err error) {
	var bad *catalog.Error
	switch {
	case errors.As(err, &bad):
		webjson.Write(w, http.StatusBadRequest, errorBody(bad.Error()))
	case errors.Is(err, catalog.ErrStale):
		webjson.Write(w, http.StatusConflict, errorBody(err.Error()))
	default:
		s.deps.Log.Error(what+": store", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(what+": the store cannot be reached just now; nothing was changed"))
	}
}

// actorOf names who made r (the history's "by").
func actorOf(r *http.Request) string {
	if p, ok := adminauth.FromContext(r.Context()); ok {
		return p.Name
	}
	return "unknown"
}

// templateNames are the names one can edit: the built-in ones, then the
// sequence's steps.
func (s *Server) templateNames() []string {
	return catalog.TemplateNames(s.deps.Templates, s.deps.Catalog.Current())
}

// template is name's text in effect: the stored one, else the built-in.
func (s *Server) template(name string) (catalog.TemplateJSON, bool) {
	return catalog.Template(s.deps.Templates, s.deps.Catalog.Snapshot(), name)
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) {
	out := []catalog.TemplateJSON{}
	for _, name := range s.templateNames() {
		t, _ := s.template(name)
		t.Text, t.HTML = "", ""
		out = append(out, t)
	}
	webjson.Write(w, http.StatusOK, map[string]any{"templates": out})
}

func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if s.historic(w, r, "template:"+name, func(c store.CatalogChange) any {
		var t store.Template
		if err := json.Unmarshal(c.Content, &t); err != nil {
			return map[string]any{"version": c.Version, "error": "unreadable"}
		}
		return map[string]any{"name": name, "version": c.Version, "at": c.At, "actor": c.Actor, "text": t.Text, "html": t.HTML}
	}) {
		return
	}
	t, ok := s.template(name)
	if !ok {
		webjson.Write(w, http.StatusNotFound, errorBody(fmt.Sprintf("no template %q: choose from %s", name, strings.Join(s.templateNames(), ", "))))
		return
	}
	webjson.Write(w, http.StatusOK, map[string]any{"name": t.Name, "text": t.Text, "html": t.HTML, "version": t.Version, "stored": t.Stored,
		"history": s.versionsOf(r, "template:"+name)})
}

// putTemplate handles PUT /api/templates/{name}: its text and HTML over
// the version read (0: the built-in one), checked by rendering every mail
// (400 with the reason, nothing saved).
func (s *Server) putTemplate(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, ok := s.template(name); !ok {
		webjson.Write(w, http.StatusNotFound, errorBody(fmt.Sprintf("no template %q: choose from %s", name, strings.Join(s.templateNames(), ", "))))
		return
	}
	var in struct {
		Version *int64 `json:"version"`
		Text    string `json:"text"`
		HTML    string `json:"html"`
	}
	if err := readCatalogBody(w, r, &in); err != nil {
		s.answerListError(w, "change a template", err)
		return
	}
	if in.Version == nil {
		webjson.Write(w, http.StatusBadRequest, errorBody("version: the version you read (GET /api/templates/"+name+"; 0: the built-in one), so that nobody's change is lost"))
		return
	}
	saved, err := s.deps.Catalog.SaveTemplate(r.Context(), store.Template{Name: name, Text: in.Text, HTML: in.HTML}, *in.Version, actorOf(r))
	if err != nil {
		s.answerCatalogError(w, "template "+name, err)
		return
	}
	t := saved.Templates[name]
	s.note(r, audit.TemplateChanged, "template:"+name, fmt.Sprintf("version %d", t.Version))
	webjson.Write(w, http.StatusOK, map[string]any{"name": name, "version": t.Version})
}
