package api

import (
	"net/http"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/catalog"
	"github.com/newsletter/newsletter/services/csvimport"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/services/media"
	"github.com/newsletter/newsletter/services/presend"
	"github.com/newsletter/newsletter/services/subscribers"
	"github.com/newsletter/newsletter/store"
)

// anyObject is a JSON object the document does not detail (its fields
// are in docs/reference.md).
var anyObject = schemaMap{"type": "object"}

// obj is a hand-written object schema: each property a Go value whose
// type is reflected (or a schemaMap), all of them required.
func obj(props schemaMap) schemaMap {
	req := make([]string, 0, len(props))
	for k := range props {
		req = append(req, k)
	}
	return schemaMap{"type": "object", "properties": props, "required": req}
}

// arrayOf is a list of v's type, never null (the handler makes it []).
func arrayOf(v any) schemaMap { return schemaMap{"type": "array", "items": v} }

// apiOps describes each route under /api/ by its mux pattern (see
// openapi.go): the route table says which routes exist and their role,
// this says what they take and answer.
var apiOps = map[string]apiOp{
	"GET " + openAPIPath: {Summary: "This description (OpenAPI 3.1)", Tag: "meta", Out: anyObject},

	// subscribers
	"GET /api/subscribers": {Summary: "List or search subscribers", Tag: "subscribers",
		Query: []string{"q", "status", "topic", "tag", "segment", "after", "before", "limit"},
		Out:   obj(schemaMap{"subscribers": arrayOf(listedSubscriber{})})},
	"GET /api/subscribers/{email}":        {Summary: "One subscriber", Tag: "subscribers", Out: subscriberView{}},
	"POST /api/subscribers":               {Summary: "Add a subscriber", Tag: "subscribers", Body: subscribers.AddInput{}, Status: http.StatusCreated, Out: listedSubscriber{}},
	"PATCH /api/subscribers/{email}":      {Summary: "Change a subscriber", Tag: "subscribers", Body: subscribers.ChangeInput{}, Out: listedSubscriber{}},
	"DELETE /api/subscribers/{email}":     {Summary: "Erase a subscriber (GDPR)", Tag: "subscribers", Status: http.StatusNoContent},
	"GET /api/subscribers/{email}/export": {Summary: "A subscriber's data (GDPR export)", Tag: "subscribers", Out: anyObject},
	"POST /api/subscribers/bulk":          {Summary: "A bulk action on addresses or a filter", Tag: "subscribers", Body: subscribers.BulkInput{}, Out: subscribers.BulkResult{}},
	"GET /api/bulk/{id}":                  {Summary: "A bulk action's progress", Tag: "subscribers", Out: listjobs.Job{}},
	"POST /api/exports":                   {Summary: "Start an export of the list", Tag: "subscribers", Body: store.Filter{}, Status: http.StatusAccepted, Out: listjobs.Job{}},
	"GET /api/exports/{id}":               {Summary: "An export's progress, or its CSV when done", Tag: "subscribers", OutTypes: []string{"text/csv"}},
	"GET /api/imports/{id}":               {Summary: "A CSV import's progress", Tag: "subscribers", Out: csvimport.Status{}},
	"POST /api/subscribers/{email}/devices": {Summary: "Register an app's push token", Tag: "subscribers", Body: deviceFields,
		Status: http.StatusCreated, Out: deviceView{}},
	"GET /api/subscribers/{email}/devices":         {Summary: "A subscriber's devices", Tag: "subscribers", Out: obj(schemaMap{"devices": arrayOf(deviceView{})})},
	"DELETE /api/subscribers/{email}/devices/{id}": {Summary: "Remove a device", Tag: "subscribers", Status: http.StatusNoContent},
	"PUT /api/subscribers/{email}/phone":           {Summary: "Set a subscriber's phone number", Tag: "subscribers", Body: phoneFields, Out: store.Phone{}},
	"DELETE /api/subscribers/{email}/phone":        {Summary: "Remove a subscriber's phone number", Tag: "subscribers", Status: http.StatusNoContent},
	"GET /api/suppressions": {Summary: "Bounced and complained addresses", Tag: "subscribers", Query: []string{"reason", "after", "limit"},
		Out: obj(schemaMap{"suppressions": arrayOf(subscriberView{}), "next": int64(0)})},
	"DELETE /api/suppressions/{email}": {Summary: "Lift a suppression", Tag: "subscribers", Out: subscriberView{}},
	"GET /api/stats":                   {Summary: "The overview's figures", Tag: "subscribers", Query: []string{"days"}, Out: store.Stats{}},
	"GET /api/topics/{id}/growth":      {Summary: "A topic's growth by day", Tag: "topics", Query: []string{"days"}, Out: store.TopicGrowth{}},

	// segments, tags, custom fields
	"GET /api/tags":     {Summary: "Every tag in use", Tag: "segments", Out: obj(schemaMap{"tags": arrayOf("")})},
	"GET /api/fields":   {Summary: "The declared custom fields", Tag: "fields", Out: obj(schemaMap{"fields": []store.FieldDef{}})},
	"POST /api/fields":  {Summary: "Declare a custom field", Tag: "fields", Body: fieldDefFields, Out: store.FieldDef{}},
	"GET /api/segments": {Summary: "The saved segments", Tag: "segments", Out: obj(schemaMap{"segments": []store.Segment{}})},
	"GET /api/segments/count": {Summary: "Count the people an expression matches", Tag: "segments", Query: []string{"expr"},
		Out: obj(schemaMap{"expr": "", "active": int64(0), "matching": int64(0)})},
	"GET /api/segments/{id}":    {Summary: "One segment", Tag: "segments", Out: store.Segment{}},
	"POST /api/segments":        {Summary: "Save a segment", Tag: "segments", Body: segmentFields, Status: http.StatusCreated, Out: store.Segment{}},
	"PUT /api/segments/{id}":    {Summary: "Change a segment", Tag: "segments", Body: segmentFields, Out: store.Segment{}},
	"DELETE /api/segments/{id}": {Summary: "Delete a segment", Tag: "segments", Status: http.StatusNoContent},

	// events, digest items, digests
	"POST /api/events": {Summary: "Notify one person or a topic's readers", Tag: "events", Body: eventFields, Status: http.StatusAccepted,
		Out: schemaMap{"type": "object", "properties": schemaMap{"id": "", "status": "", "topic": "", "email": ""}, "required": []string{"id", "status"}}},
	"POST /api/items":           {Summary: "Add a digest item", Tag: "events", Body: itemFields, Status: http.StatusCreated, Out: store.Item{}},
	"PUT /api/items/{id}":       {Summary: "Change a digest item", Tag: "events", Body: itemFields, Out: store.Item{}},
	"DELETE /api/items/{id}":    {Summary: "Delete a digest item", Tag: "events", Status: http.StatusNoContent},
	"POST /api/digest/run":      {Summary: "Start a digest run", Tag: "events", Body: digestRunFields, Status: http.StatusAccepted, Out: obj(schemaMap{"period": "", "status": ""})},
	"GET /api/digests/{period}": {Summary: "A digest run's progress", Tag: "events", Out: store.DigestRun{}},

	// issues
	"POST /api/issues": {Summary: "Create a draft issue", Tag: "issues", Body: issueFields, Status: http.StatusCreated,
		Out: schemaMap{"type": "object", "properties": schemaMap{"id": int64(0), "slug": "", "status": "", "warnings": []string{}}, "required": []string{"id", "slug", "status"}}},
	"GET /api/issues": {Summary: "List issues, the trash (?trash=1), or those with every word of ?q=", Tag: "issues", Query: []string{"status", "trash", "q", "after", "limit"},
		Out: schemaMap{"type": "object", "properties": schemaMap{"issues": []store.Issue{}, "next": ""}, "required": []string{"issues"}}},
	"GET /api/issues/{id}":    {Summary: "One issue", Tag: "issues", Out: store.Issue{}},
	"PUT /api/issues/{id}":    {Summary: "Change an issue", Tag: "issues", Body: putIssueFields, Out: savedIssue{}},
	"DELETE /api/issues/{id}": {Summary: "Move a draft, scheduled or sent issue to the trash (restorable for 30 days)", Tag: "issues", Status: http.StatusNoContent},
	"POST /api/media": {Summary: "Upload an image for issues (the raw body, or the multipart field file; PNG, JPEG, GIF or WebP by content; at most 5 MiB)", Tag: "issues",
		Query: []string{"alt"}, Status: http.StatusCreated, Out: media.Media{}},
	"POST /api/issues/{id}/restore": {Summary: "Bring an issue back from the trash (a scheduled one as a draft)", Tag: "issues", Out: store.Issue{}},
	"GET /api/issues/{id}/preview": {Summary: "The issue rendered (HTML, or text with ?format=text)", Tag: "issues", Query: []string{"format", "topic"},
		OutTypes: []string{"text/html", "text/plain"}},
	"POST /api/issues/{id}/test": {Summary: "Send a test to some addresses", Tag: "issues", Body: testFields, Out: obj(schemaMap{"sent": 0})},
	"POST /api/issues/{id}/send": {Summary: "Send or schedule an issue", Tag: "issues", Body: sendFields, Status: http.StatusAccepted,
		Out: obj(schemaMap{"id": int64(0), "status": "", "audience": 0, "html_bytes": 0, "overridden": arrayOf("")})},
	"GET /api/issues/{id}/checks": {Summary: "The pre-send checks: each a level (error, warning, ok), what it found and the fix", Tag: "issues",
		Out: obj(schemaMap{"checks": []presend.Result{}})},
	"GET /api/issues/{id}/audience":    {Summary: "How many an issue would reach", Tag: "issues", Out: obj(schemaMap{"id": int64(0), "audience": 0})},
	"POST /api/issues/{id}/pause":      issueActionOp("Pause a sending issue", nil),
	"POST /api/issues/{id}/resume":     issueActionOp("Resume a paused issue", nil),
	"POST /api/issues/{id}/cancel":     issueActionOp("Cancel a scheduled or sending issue", nil),
	"POST /api/issues/{id}/reschedule": issueActionOp("Move a scheduled issue", whenFields),
	"POST /api/issues/{id}/unschedule": issueActionOp("Make a scheduled issue a draft again", nil),
	"GET /api/issues/{id}/progress":    {Summary: "A sending's progress", Tag: "issues", Out: store.IssueProgress{}},
	"GET /api/issues/{id}/report":      {Summary: "An issue's report (JSON, or CSV with ?format=csv)", Tag: "issues", Query: []string{"format"}, Out: issues.Report{}},
	"POST /api/issues/{id}/duplicate":  {Summary: "Copy an issue into a new draft", Tag: "issues", Status: http.StatusCreated, Out: store.Issue{}},
	"GET /api/issues/{id}/versions": {Summary: "An issue's kept versions", Tag: "issues",
		Out: obj(schemaMap{"version": int64(0), "versions": []store.IssueVersion{}})},
	"POST /api/issues/{id}/versions/{n}/restore": {Summary: "Restore a version", Tag: "issues", Body: versionFields, Out: store.Issue{}},

	// topics, the welcome sequence, templates
	"GET /api/topics":  {Summary: "The topics (or an earlier version with ?version=)", Tag: "topics", Query: []string{"version"}, Out: anyObject},
	"POST /api/topics": {Summary: "Add a topic", Tag: "topics", Body: anyObject, Status: http.StatusCreated, Out: obj(schemaMap{"version": int64(0), "topic": catalog.TopicJSON{}})},
	"PUT /api/topics": {Summary: "Replace the topics", Tag: "topics", Body: obj(schemaMap{"version": int64(0), "topics": []catalog.TopicJSON{}}),
		Out: obj(schemaMap{"version": int64(0), "topics": []catalog.TopicJSON{}})},
	"GET /api/sequence": {Summary: "The welcome sequence", Tag: "topics", Query: []string{"version"}, Out: anyObject},
	"PUT /api/sequence": {Summary: "Replace the welcome sequence", Tag: "topics", Body: anyObject,
		Out: obj(schemaMap{"version": int64(0), "topic": "", "steps": []catalog.StepJSON{}})},
	"GET /api/templates":        {Summary: "The mail templates", Tag: "topics", Out: obj(schemaMap{"templates": []catalog.TemplateJSON{}})},
	"GET /api/templates/{name}": {Summary: "One template", Tag: "topics", Query: []string{"version"}, Out: anyObject},
	"PUT /api/templates/{name}": {Summary: "Change a template", Tag: "topics", Body: anyObject, Out: obj(schemaMap{"name": "", "version": int64(0)})},

	// settings, webhooks, accounts, audit
	"GET /api/settings": {Summary: "The newsletter's settings", Tag: "settings", Out: store.Settings{}},
	"PUT /api/settings": {Summary: "Change the settings", Tag: "settings", Body: settingsFields, Out: store.Settings{}},
	"POST /api/webhooks": {Summary: "Register a webhook endpoint (answers its secret once)", Tag: "webhooks", Body: webhookFields, Status: http.StatusCreated,
		Out: struct {
			webhookView
			Secret string `json:"secret"`
		}{}},
	"GET /api/webhooks":                 {Summary: "The webhook endpoints", Tag: "webhooks", Out: obj(schemaMap{"webhooks": arrayOf(webhookView{})})},
	"DELETE /api/webhooks/{id}":         {Summary: "Remove an endpoint", Tag: "webhooks", Status: http.StatusNoContent},
	"POST /api/webhooks/{id}/enable":    {Summary: "Enable an endpoint", Tag: "webhooks", Out: webhookView{}},
	"POST /api/webhooks/{id}/disable":   {Summary: "Disable an endpoint", Tag: "webhooks", Out: webhookView{}},
	"POST /api/webhooks/{id}/test":      {Summary: "Send a test event", Tag: "webhooks", Status: http.StatusAccepted, Out: obj(schemaMap{"event": "", "type": ""})},
	"GET /api/webhooks/{id}/deliveries": {Summary: "An endpoint's recent deliveries", Tag: "webhooks", Out: obj(schemaMap{"deliveries": []store.WebhookDelivery{}})},
	"POST /api/accounts/invites":        {Summary: "Invite a console account", Tag: "accounts", Body: inviteFields, Status: http.StatusCreated, Out: inviteView{}},
	"DELETE /api/accounts/invites/{id}": {Summary: "Revoke an invite", Tag: "accounts", Status: http.StatusNoContent},
	"GET /api/accounts":                 {Summary: "The console's accounts", Tag: "accounts", Out: obj(schemaMap{"accounts": arrayOf(accountView{})})},
	"GET /api/audit": {Summary: "The audit log, newest first", Tag: "audit", Query: []string{"after", "limit"},
		Out: schemaMap{"type": "object", "properties": schemaMap{"entries": []audit.Entry{}, "next": ""}, "required": []string{"entries"}}},
}

// issueActionOp is one of the issue moves of issues.Actions.
func issueActionOp(summary string, body fields) apiOp {
	op := apiOp{Summary: summary, Tag: "issues", Out: obj(schemaMap{"id": int64(0), "status": ""})}
	if body != nil {
		op.Body = body
	}
	return op
}
