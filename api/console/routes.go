package console

import (
	"net/http"

	"github.com/newsletter/newsletter/services/issues"
)

// routes is the console's one list of routes, each with the role it
// needs: the same as its /api/ route (viewer reads; editor writes issues
// and items, previews and test-sends; admin does the rest).
func (h *Handler) routes() {
	h.sessionRoutes(h.mux)
	h.listRoutes(h.mux)
	h.segmentRoutes(h.mux)
	h.issueRoutes(h.mux)
	h.itemRoutes(h.mux)
	h.catalogRoutes(h.mux)
	h.webhookRoutes(h.mux)
	h.suppressionRoutes(h.mux)
	h.importRoutes(h.mux)
	h.accountRoutes(h.mux)
	h.teamRoutes(h.mux)
	h.tokenRoutes(h.mux)
}

// sessionRoutes are the routes of signing in and out, and invitations.
func (h *Handler) sessionRoutes(m *http.ServeMux) {
	m.Handle("GET /admin/static/", h.static())
	m.HandleFunc("GET /admin/login", h.showLogin)
	m.HandleFunc("POST /admin/login", h.login)
	m.HandleFunc("GET /admin/invite/{token}", h.showInvite)
	m.HandleFunc("POST /admin/invite/{token}", h.acceptInvite)
	m.Handle("POST /admin/logout", h.require(Viewer, h.logout))
	m.Handle("/admin/", h.require(Viewer, func(w http.ResponseWriter, r *http.Request) { h.notFound(w, r, "page") }))

	m.Handle("GET /admin/{$}", h.require(Viewer, h.overview))
}

// listRoutes are the routes of the people on the list.
func (h *Handler) listRoutes(m *http.ServeMux) {
	m.Handle("GET /admin/subscribers", h.require(Viewer, h.listSubscribers))
	m.Handle("POST /admin/subscribers/find", h.require(Viewer, h.findSubscriber))
	m.Handle("POST /admin/subscribers", h.require(Admin, h.addSubscriber))
	m.Handle("POST /admin/subscribers/bulk", h.require(Admin, h.bulkSubscribers))
	m.Handle("POST /admin/subscribers/{id}/edit", h.require(Admin, h.editSubscriber))
	m.Handle("POST /admin/exports", h.require(Admin, h.exportList))
	m.Handle("GET /admin/exports/{id}/download", h.require(Admin, h.downloadExport))
	m.Handle("GET /admin/jobs/{id}", h.require(Admin, h.showListJob))
	m.Handle("GET /admin/subscribers/{id}", h.require(Viewer, h.showSubscriber))
	m.Handle("POST /admin/subscribers/{id}/topics", h.require(Admin, h.subscriberTopics))
	m.Handle("POST /admin/subscribers/{id}/unsubscribe", h.require(Admin, h.unsubscribeSubscriber))
	m.Handle("POST /admin/subscribers/{id}/export", h.require(Admin, h.exportSubscriber))
	m.Handle("POST /admin/subscribers/{id}/erase", h.require(Admin, h.eraseSubscriber))
}

// segmentRoutes are the routes of segments and the custom fields.
func (h *Handler) segmentRoutes(m *http.ServeMux) {
	m.Handle("GET /admin/segments", h.require(Viewer, h.listSegments))
	m.Handle("GET /admin/segments/count", h.require(Viewer, h.countSegment))
	m.Handle("POST /admin/segments", h.require(Editor, h.createSegment))
	m.Handle("GET /admin/segments/{id}", h.require(Viewer, h.showSegment))
	m.Handle("POST /admin/segments/{id}", h.require(Editor, h.saveSegment))
	m.Handle("POST /admin/segments/{id}/delete", h.require(Editor, h.deleteSegment))
	m.Handle("GET /admin/fields", h.require(Viewer, h.listFields))
	m.Handle("POST /admin/fields", h.require(Editor, h.declareField))
}

// issueRoutes are the routes of issues, their previews, versions and actions.
func (h *Handler) issueRoutes(m *http.ServeMux) {
	m.Handle("GET /admin/issues", h.require(Viewer, h.listIssues))
	m.Handle("GET /admin/issues/new", h.require(Editor, h.newIssue))
	m.Handle("POST /admin/issues", h.require(Editor, h.createIssue))
	m.Handle("POST /admin/issues/preview", h.require(Editor, h.previewIssue))
	m.Handle("GET /admin/issues/{id}", h.require(Viewer, h.showIssue))
	m.Handle("POST /admin/issues/{id}", h.require(Editor, h.saveIssue))
	m.Handle("GET /admin/issues/{id}/progress", h.require(Viewer, h.issueProgress))
	m.Handle("GET /admin/issues/{id}/report.csv", h.require(Viewer, h.issueReportCSV))
	m.Handle("POST /admin/issues/{id}/test", h.require(Editor, h.testIssue))
	m.Handle("POST /admin/issues/{id}/send", h.require(Editor, h.sendIssue))
	m.Handle("POST /admin/issues/{id}/duplicate", h.require(Editor, h.duplicateIssue))
	m.Handle("POST /admin/issues/{id}/send/review", h.require(Editor, h.reviewSend))
	if h.d.Media != nil {
		m.Handle("POST /admin/issues/{id}/media", h.require(Editor, h.uploadIssueImage))
	}
	m.Handle("GET /admin/issues/{id}/delete", h.require(Editor, h.confirmDeleteIssue))
	m.Handle("POST /admin/issues/{id}/delete", h.require(Editor, h.deleteIssue))
	m.Handle("POST /admin/issues/{id}/restore", h.require(Editor, h.untrashIssue))
	m.Handle("GET /admin/issues/{id}/cancel", h.require(Editor, h.confirmCancelIssue))
	m.Handle("GET /admin/issues/{id}/versions", h.require(Viewer, h.issueVersions))
	m.Handle("POST /admin/issues/{id}/versions/{n}/restore", h.require(Editor, h.restoreIssueVersion))
	m.Handle("GET /admin/issues/{id}/preview", h.require(Viewer, h.showPreview))
	for _, action := range issues.Actions {
		m.Handle("POST /admin/issues/{id}/"+action, h.require(Editor, h.changeIssue(action)))
	}
}

// itemRoutes are the routes of digest items and the digest run.
func (h *Handler) itemRoutes(m *http.ServeMux) {
	m.Handle("GET /admin/items", h.require(Viewer, h.listItems))
	m.Handle("POST /admin/items", h.require(Editor, h.saveItem))
	m.Handle("GET /admin/items/{id}", h.require(Viewer, h.editItem))
	m.Handle("POST /admin/items/{id}", h.require(Editor, h.updateItem))
	m.Handle("POST /admin/items/{id}/delete", h.require(Editor, h.deleteItem))
	m.Handle("POST /admin/digest/run", h.require(Admin, h.runDigest))
}

// catalogRoutes are the routes of topics, the sequence and the mail templates.
func (h *Handler) catalogRoutes(m *http.ServeMux) {
	m.Handle("GET /admin/topics", h.require(Viewer, h.listTopics))
	m.Handle("POST /admin/topics", h.require(Admin, h.addTopic))
	m.Handle("GET /admin/topics/{id}", h.require(Viewer, h.editTopic))
	m.Handle("POST /admin/topics/{id}", h.require(Admin, h.saveTopic))
	m.Handle("POST /admin/topics/{id}/retire", h.require(Admin, h.retireTopic(true)))
	m.Handle("POST /admin/topics/{id}/unretire", h.require(Admin, h.retireTopic(false)))
	m.Handle("GET /admin/sequence", h.require(Viewer, h.showSequence))
	m.Handle("POST /admin/sequence", h.require(Admin, h.saveSequence))
	m.Handle("GET /admin/sequence/{n}/preview", h.require(Viewer, h.previewStep))
	m.Handle("POST /admin/sequence/{n}/test", h.require(Editor, h.testStep))
	m.Handle("GET /admin/templates", h.require(Viewer, h.listMailTemplates))
	m.Handle("GET /admin/templates/{name}", h.require(Viewer, h.showMailTemplate))
	m.Handle("POST /admin/templates/{name}", h.require(Admin, h.saveMailTemplate))
}

// webhookRoutes are the routes of outgoing webhook endpoints.
func (h *Handler) webhookRoutes(m *http.ServeMux) {
	m.Handle("GET /admin/webhooks", h.require(Admin, h.listWebhooks))
	m.Handle("POST /admin/webhooks", h.require(Admin, h.addWebhook))
	m.Handle("POST /admin/webhooks/{id}/test", h.require(Admin, h.testWebhook))
	for _, action := range []string{"enable", "disable", "delete"} {
		m.Handle("POST /admin/webhooks/{id}/"+action, h.require(Admin, h.changeWebhook(action)))
	}
}

// suppressionRoutes are the routes of the suppression list.
func (h *Handler) suppressionRoutes(m *http.ServeMux) {
	m.Handle("GET /admin/suppressions", h.require(Viewer, h.listSuppressions))
	m.Handle("POST /admin/suppressions/{id}/lift", h.require(Admin, h.liftSuppression))
}

// importRoutes are the routes of imports and the audit log.
func (h *Handler) importRoutes(m *http.ServeMux) {
	m.Handle("GET /admin/import", h.require(Admin, h.showImport))
	m.Handle("POST /admin/import", h.require(Admin, h.uploadImport))
	m.Handle("GET /admin/import/{job}", h.require(Admin, h.showImportStatus))
	m.Handle("POST /admin/import/{job}", h.require(Admin, h.confirmImport))

	m.Handle("GET /admin/audit", h.require(Admin, h.listAudit))
}

// accountRoutes are the routes of one's own account.
func (h *Handler) accountRoutes(m *http.ServeMux) {
	m.Handle("GET /admin/account", h.require(Viewer, h.showAccount))
	m.Handle("POST /admin/account/password", h.require(Viewer, h.changePassword))
	m.Handle("POST /admin/account/totp", h.require(Viewer, h.newTOTP))
	m.Handle("POST /admin/account/totp/confirm", h.require(Viewer, h.confirmTOTP))
}

// teamRoutes are the routes of the team and the settings.
func (h *Handler) teamRoutes(m *http.ServeMux) {
	m.Handle("GET /admin/accounts", h.require(Admin, h.listAccounts))
	m.Handle("POST /admin/accounts", h.require(Admin, h.inviteAccount))
	m.Handle("POST /admin/accounts/invites/{id}/revoke", h.require(Admin, h.revokeInvite))
	m.Handle("POST /admin/accounts/{id}/role", h.require(Admin, h.changeRole))
	m.Handle("POST /admin/accounts/{id}/suspend", h.require(Admin, h.suspendAccount(true)))
	m.Handle("POST /admin/accounts/{id}/restore", h.require(Admin, h.suspendAccount(false)))
	m.Handle("GET /admin/settings", h.require(Admin, h.showSettings))
	m.Handle("POST /admin/settings", h.require(Admin, h.saveSettings))
}

// tokenRoutes are the routes of API tokens.
func (h *Handler) tokenRoutes(m *http.ServeMux) {
	m.Handle("GET /admin/tokens", h.require(Admin, h.listTokens))
	m.Handle("POST /admin/tokens", h.require(Admin, h.createToken))
	m.Handle("POST /admin/tokens/{name}/revoke", h.require(Admin, h.revokeToken))
}
