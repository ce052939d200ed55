package console

import (
	"net/http"

	"github.com/newsletter/newsletter/services/issues"
)

// routes is the console's one list of routes, each with the role it
// needs: the same as its /api/ route (viewer reads; editor writes issues
// and items, previews and test-sends; admin does the rest).
func (h *Handler) routes() {
	m := h.mux
	m.Handle("GET /admin/static/", h.static())
	m.HandleFunc("GET /admin/login", h.showLogin)
	m.HandleFunc("POST /admin/login", h.login)
	m.HandleFunc("GET /admin/invite/{token}", h.showInvite)
	m.HandleFunc("POST /admin/invite/{token}", h.acceptInvite)
	m.Handle("POST /admin/logout", h.require(Viewer, h.logout))
	m.Handle("/admin/", h.require(Viewer, func(w http.ResponseWriter, r *http.Request) { h.notFound(w, r, "page") }))

	m.Handle("GET /admin/{$}", h.require(Viewer, h.overview))

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

	m.Handle("GET /admin/segments", h.require(Viewer, h.listSegments))
	m.Handle("GET /admin/segments/count", h.require(Viewer, h.countSegment))
	m.Handle("POST /admin/segments", h.require(Editor, h.createSegment))
	m.Handle("GET /admin/segments/{id}", h.require(Viewer, h.showSegment))
	m.Handle("POST /admin/segments/{id}", h.require(Editor, h.saveSegment))
	m.Handle("POST /admin/segments/{id}/delete", h.require(Editor, h.deleteSegment))

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
	m.Handle("POST /admin/issues/{id}/delete", h.require(Editor, h.deleteIssue))
	m.Handle("GET /admin/issues/{id}/versions", h.require(Viewer, h.issueVersions))
	m.Handle("POST /admin/issues/{id}/versions/{n}/restore", h.require(Editor, h.restoreIssueVersion))
	m.Handle("GET /admin/issues/{id}/preview", h.require(Viewer, h.showPreview))
	for _, action := range issues.Actions {
		m.Handle("POST /admin/issues/{id}/"+action, h.require(Editor, h.changeIssue(action)))
	}

	m.Handle("GET /admin/items", h.require(Viewer, h.listItems))
	m.Handle("POST /admin/items", h.require(Editor, h.saveItem))
	m.Handle("GET /admin/items/{id}", h.require(Viewer, h.editItem))
	m.Handle("POST /admin/items/{id}", h.require(Editor, h.updateItem))
	m.Handle("POST /admin/items/{id}/delete", h.require(Editor, h.deleteItem))
	m.Handle("POST /admin/digest/run", h.require(Admin, h.runDigest))

	m.Handle("GET /admin/topics", h.require(Viewer, h.listTopics))
	m.Handle("POST /admin/topics", h.require(Admin, h.addTopic))
	m.Handle("GET /admin/topics/{id}", h.require(Viewer, h.editTopic))
	m.Handle("POST /admin/topics/{id}", h.require(Admin, h.saveTopic))
	m.Handle("POST /admin/topics/{id}/retire", h.require(Admin, h.retireTopic(true)))
	m.Handle("POST /admin/topics/{id}/unretire", h.require(Admin, h.retireTopic(false)))
	m.Handle("GET /admin/sequence", h.require(Viewer, h.showSequence))
	m.Handle("POST /admin/sequence", h.require(Admin, h.saveSequence))
	m.Handle("GET /admin/templates", h.require(Viewer, h.listMailTemplates))
	m.Handle("GET /admin/templates/{name}", h.require(Viewer, h.showMailTemplate))
	m.Handle("POST /admin/templates/{name}", h.require(Admin, h.saveMailTemplate))

	m.Handle("GET /admin/webhooks", h.require(Admin, h.listWebhooks))
	m.Handle("POST /admin/webhooks", h.require(Admin, h.addWebhook))
	m.Handle("POST /admin/webhooks/{id}/test", h.require(Admin, h.testWebhook))
	for _, action := range []string{"enable", "disable", "delete"} {
		m.Handle("POST /admin/webhooks/{id}/"+action, h.require(Admin, h.changeWebhook(action)))
	}

	m.Handle("GET /admin/suppressions", h.require(Viewer, h.listSuppressions))
	m.Handle("POST /admin/suppressions/{id}/lift", h.require(Admin, h.liftSuppression))

	m.Handle("GET /admin/import", h.require(Admin, h.showImport))
	m.Handle("POST /admin/import", h.require(Admin, h.uploadImport))
	m.Handle("GET /admin/import/{job}", h.require(Admin, h.showImportStatus))

	m.Handle("GET /admin/audit", h.require(Admin, h.listAudit))

	m.Handle("GET /admin/account", h.require(Viewer, h.showAccount))
	m.Handle("POST /admin/account/password", h.require(Viewer, h.changePassword))
	m.Handle("POST /admin/account/totp", h.require(Viewer, h.newTOTP))
	m.Handle("POST /admin/account/totp/confirm", h.require(Viewer, h.confirmTOTP))

	m.Handle("GET /admin/accounts", h.require(Admin, h.listAccounts))
	m.Handle("POST /admin/accounts", h.require(Admin, h.inviteAccount))
	m.Handle("POST /admin/accounts/invites/{id}/revoke", h.require(Admin, h.revokeInvite))
	m.Handle("POST /admin/accounts/{id}/role", h.require(Admin, h.changeRole))
	m.Handle("POST /admin/accounts/{id}/suspend", h.require(Admin, h.suspendAccount(true)))
	m.Handle("POST /admin/accounts/{id}/restore", h.require(Admin, h.suspendAccount(false)))
	m.Handle("GET /admin/settings", h.require(Admin, h.showSettings))
	m.Handle("POST /admin/settings", h.require(Admin, h.saveSettings))

	m.Handle("GET /admin/tokens", h.require(Admin, h.listTokens))
	m.Handle("POST /admin/tokens", h.require(Admin, h.createToken))
	m.Handle("POST /admin/tokens/{name}/revoke", h.require(Admin, h.revokeToken))
}
