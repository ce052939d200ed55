// Package csvimport adds subscribers from a CSV file: the `newsletter
// import` command and the console's upload share it, so a row is checked
// and stored the same way whichever door it came through.
//
// Rows stream into the store in batches of Batch: memory stays at one
// batch whatever the file's size. An import never re-subscribes someone
// who left (store.SubscribeRequest.OnlyNew). A bad row is rejected with
// its line number and reason and the others go on; a file that cannot be
// read at all stops the import.
package csvimport
