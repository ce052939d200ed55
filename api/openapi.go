package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/newsletter/newsletter/internal/adminauth"
)

// The API's description (OpenAPI 3.1) is built from the route table the
// mux keeps (Routes: each pattern and the role its guard needs) and the
// description of each operation in apiOps (openapi_ops.go), keyed by the
// same pattern: paths, path parameters and security come from the table,
// summaries and schemas from apiOps, the schemas reflected from the Go
// types the handlers write. TestOpenAPIMatchesRoutes fails when a route
// under /api/ has no entry in apiOps or an entry no route.

// openAPIPath is the description's own route.
const openAPIPath = "/api/openapi.json"

// apiOp describes one operation of the admin API.
type apiOp struct {
	Summary string
	Tag     string
	// Query are the query parameters (strings, all optional).
	Query []string
	// Body is the JSON request body: a schemaMap or a Go value whose type
	// the handler decodes (nil: none).
	Body any
	// Status is the answer on success (0: 200); Out its JSON body, a
	// schemaMap or a Go value of the type the handler writes (nil: no
	// body, or OutTypes').
	Status int
	Out    any
	// OutTypes are the media types of a body that is not JSON (none:
	// JSON).
	OutTypes []string
}

// openAPIDoc is the description's bytes, built once on the first request:
// by then every route is on the mux (the binary mounts its extra routes
// before it serves), and the table cannot change after.
type openAPIDoc struct {
	once  sync.Once
	bytes []byte
	err   error
}

func (s *Server) openAPIRoutes() {
	s.mux.HandleFunc("GET "+openAPIPath, s.serveOpenAPI)
}

// serveOpenAPI handles GET /api/openapi.json: public (it shows the
// routes' shapes, no data), the same bytes every time.
func (s *Server) serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	s.openapi.once.Do(func() { s.openapi.bytes, s.openapi.err = json.Marshal(s.OpenAPI()) })
	if s.openapi.err != nil {
		s.deps.Log.Error("openapi: encode the description", "err", s.openapi.err)
		http.Error(w, "the API description cannot be made", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	if _, err := w.Write(s.openapi.bytes); err != nil {
		s.deps.Log.Debug("openapi: write", "err", err)
	}
}

// OpenAPI is the API's description as a JSON-ready value: every route
// under /api/ on the mux with its entry in apiOps (a route without one
// is listed with its pattern as summary, and the test says so).
func (s *Server) OpenAPI() map[string]any {
	schemas := newSchemaSet()
	errSchema := schemas.of(schemaMap{"type": "object", "properties": schemaMap{"error": ""}, "required": []string{"error"}})
	schemas.named["Error"] = errSchema
	paths := map[string]map[string]any{}
	for _, rt := range s.Routes() {
		method, path, ok := strings.Cut(rt.Pattern, " ")
		if !ok || !strings.HasPrefix(path, "/api/") {
			continue
		}
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		paths[path][strings.ToLower(method)] = operation(schemas, rt, path, apiOps[rt.Pattern])
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   "newsletter admin API",
			"version": "1",
			"description": "The JSON API under /api/. Every operation but this description takes a Bearer token " +
				"(NEWSLETTER_ADMIN_TOKEN or a stored token) whose role is at least the operation's x-role.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas": schemas.named,
			"securitySchemes": map[string]any{
				"bearerAuth": map[string]any{"type": "http", "scheme": "bearer",
					"description": "NEWSLETTER_ADMIN_TOKEN (every role) or a token made with `newsletter token create` (its role)."},
			},
		},
	}
}

// operation is one route's operation object.
func operation(schemas *schemaSet, rt Route, path string, op apiOp) map[string]any {
	if op.Summary == "" {
		op.Summary = rt.Pattern
	}
	out := map[string]any{
		"summary":     op.Summary,
		"operationId": operationID(rt.Pattern),
		"responses":   responses(schemas, op),
	}
	if op.Tag != "" {
		out["tags"] = []string{op.Tag}
	}
	if params := parameters(path, op.Query); len(params) > 0 {
		out["parameters"] = params
	}
	if op.Body != nil {
		schemas.request = true
		body := schemas.of(op.Body)
		schemas.request = false
		out["requestBody"] = map[string]any{"required": true, "content": map[string]any{
			"application/json": map[string]any{"schema": body}}}
	}
	if rt.Role == "" {
		out["security"] = []any{}
	} else {
		out["security"] = []any{map[string]any{"bearerAuth": []string{}}}
		out["x-role"] = string(rt.Role)
		out["description"] = "Needs the " + string(rt.Role) + " role or one above it (" + rolesFrom(rt.Role) + ")."
	}
	return out
}

func responses(schemas *schemaSet, op apiOp) map[string]any {
	status := op.Status
	if status == 0 {
		status = http.StatusOK
	}
	ok := map[string]any{"description": http.StatusText(status)}
	switch {
	case len(op.OutTypes) > 0:
		content := map[string]any{}
		for _, t := range op.OutTypes {
			content[t] = map[string]any{}
		}
		ok["content"] = content
	case op.Out != nil:
		ok["content"] = map[string]any{"application/json": map[string]any{"schema": schemas.of(op.Out)}}
	}
	return map[string]any{
		strconv.Itoa(status): ok,
		"default": map[string]any{"description": "An error (401, 403, 404, 409, 400, 413, 503 …)",
			"content": map[string]any{"application/json": map[string]any{"schema": schemaMap{"$ref": "#/components/schemas/Error"}}}},
	}
}

// parameters are the path's wildcards (required strings) and the query's.
func parameters(path string, query []string) []any {
	var out []any
	for rest := path; ; {
		i := strings.Index(rest, "{")
		if i < 0 {
			break
		}
		j := strings.Index(rest[i:], "}") + i
		out = append(out, map[string]any{"name": rest[i+1 : j], "in": "path", "required": true, "schema": schemaMap{"type": "string"}})
		rest = rest[j+1:]
	}
	for _, q := range query {
		out = append(out, map[string]any{"name": q, "in": "query", "schema": schemaMap{"type": "string"}})
	}
	return out
}

// operationID is a pattern's name for generated clients: its method and
// its path's words, e.g. "getApiSubscribersByEmail".
func operationID(pattern string) string {
	method, path, _ := strings.Cut(pattern, " ")
	id := strings.ToLower(method)
	for _, part := range strings.FieldsFunc(path, func(r rune) bool { return r == '/' || r == '.' || r == '-' }) {
		if strings.HasPrefix(part, "{") {
			part = "by" + exportedName(strings.Trim(part, "{}"))
		}
		id += exportedName(part)
	}
	return id
}

// rolesFrom names need and the roles above it.
func rolesFrom(need adminauth.Role) string {
	var names []string
	for _, r := range adminauth.Roles {
		if r.Allows(need) {
			names = append(names, string(r))
		}
	}
	return strings.Join(names, ", ")
}
