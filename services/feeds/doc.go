// Package feeds fetches and reads the RSS and Atom feeds a topics file
// names (RSS-to-email): one conditional GET with a size cap, parsed by
// gofeed into plain entries the store turns into items. It keeps no
// state; the poller (tasks/worker) keeps the validators and the entries
// already seen in the store.
package feeds
