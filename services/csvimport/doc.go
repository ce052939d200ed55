// Package csvimport adds subscribers from a CSV file: the `newsletter
// import` command and the console's upload share it, so a row is checked
// and stored the same way whichever door it came through.
//
// Rows stream into the store in batches of Batch: memory stays at one
// batch whatever the file's size. An import never re-subscribes someone
// who left (store.SubscribeRequest.OnlyNew). A bad row is rejected with
// its line number and reason and the others go on; a file that cannot be
// read at all stops the import.
//
// The header row says what each column is (Recognise): our own names, or
// the export of Mailchimp, Substack, Kit, Buttondown or listmonk, whose
// columns are mapped to ours (sources.go). Only people whose subscription
// runs at the service come in; a status or column saying they left,
// bounced, were blocklisted or never confirmed rejects their row.
package csvimport
