package channels

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
)

// Plugin is a channel added through the seam: what the binary registers
// (one line in cmd/newsletter/channels.go) to get, by the channel's name,
// a lane and a queue of its own, a "<name>:deliver" task that the fan-out
// queues for each reader who chose the channel for the event's topic, the
// worker's generic lane applying its Outcomes, a place in the events
// API's "channels" and in the preference centre. Its New builds it when
// the process starts; what else it does is told by which of the optional
// interfaces below it implements (as net/http composes handlers).
type Plugin struct {
	// Name is the channel's name, as its Spec says: 2-24 of a-z, 0-9 and
	// _, a letter first, and no built-in lane's (email, push, webhook,
	// sms).
	Name string
	// Label is how the preference centre names it ("In the app").
	Label string
	// DefaultOn puts it among a topic's channels until the person
	// chooses (as e-mail and push are; SMS is not).
	DefaultOn bool
	// Workers is the lane's pool by default (0: 4); Rate its shared rate
	// per second (0: none). NEWSLETTER_<NAME>_CONCURRENCY and
	// NEWSLETTER_<NAME>_RATE override them.
	Workers, Rate int
	// On tells, from the environment, whether the channel is on in this
	// process (nil: always). An off channel has no lane, no place in the
	// events API or the preference centre, and no routes: the inbox is on
	// only with its secret. It is read once, when the process starts.
	On func(getenv func(string) string) bool
	// New builds the channel. An error stops the process at start.
	New func(Env) (Channel, error)
}

// Env is what the binary hands a channel it builds: the service's Redis
// (a channel may keep its own keys there, each under its own prefix
// "ch:<name>:" and with a {tag} per person on a cluster), its public base
// URL, the environment and a logger.
type Env struct {
	Redis   redis.UniversalClient
	BaseURL string
	Getenv  func(string) string
	Log     *slog.Logger
	// People finds a person by address, for a channel whose own routes
	// are called with one (an app's reader API).
	People People
}

// People finds the service's people for a channel.
type People interface {
	// ByEmail is the person of a normalised address, or ErrNoPerson.
	ByEmail(ctx context.Context, email string) (Person, error)
}

// ErrNoPerson: nobody has that address.
var ErrNoPerson = errors.New("channels: no such person")

// Person is the reader a message is for, as the generic lane hands them
// to a channel.
type Person struct {
	ID       int64
	Email    string
	Timezone string
}

// Event is one event for one person, as the generic lane hands it to a
// channel to make its Messages from.
type Event struct {
	// Key names the event (with the person, it names the message: the
	// same on every retry).
	Key    string
	Person Person
	Topics []string
	Title  string
	Body   string // Markdown, as posted
	URL    string
	At     time.Time
}

// EventMessage is a message's Body for a channel without a Composer: the
// Event as JSON, naming the person by id (no address leaves the service
// unless a Composer puts it in). The generic lane writes it and such a
// channel reads it.
type EventMessage struct {
	Key    string    `json:"key"`
	Person int64     `json:"person"`
	Topics []string  `json:"topics"`
	Title  string    `json:"title"`
	Body   string    `json:"body,omitempty"`
	URL    string    `json:"url,omitempty"`
	At     time.Time `json:"at,omitzero"`
}

// MessageOf is ev as an EventMessage.
func MessageOf(ev Event) EventMessage {
	return EventMessage{Key: ev.Key, Person: ev.Person.ID, Topics: ev.Topics, Title: ev.Title, Body: ev.Body, URL: ev.URL, At: ev.At}
}

// Addresser is a channel that keeps its own addresses of a person (a
// chat id, a device). Without it, a person has one address on the
// channel: their id, in decimal (an in-app inbox is the person's own).
// No address: nothing to send (the task is done).
type Addresser interface {
	Addresses(ctx context.Context, p Person) ([]string, error)
}

// Composer makes the message to one address from an event. Without it a
// message's Body is the Event as JSON: key, person (the id; no address
// leaves the service unless a Composer puts it in), topics, title, body,
// url, at.
type Composer interface {
	Compose(ev Event, to string) (Message, error)
}

// Retirer forgets an address its provider answered Retire for.
type Retirer interface {
	Retire(ctx context.Context, to string) error
}

// Eraser erases what the channel keeps of a person (the reader's erase).
type Eraser interface {
	Erase(ctx context.Context, p Person) error
}

// Exporter answers what the channel keeps of a person (the reader's
// export), as a JSON value.
type Exporter interface {
	Export(ctx context.Context, p Person) (any, error)
}

// Inbound is a channel that serves HTTP of its own (a provider's
// callbacks, an app's reader API): the API mounts Handler under
// /channels/<name>/, with the prefix stripped. Each request is bounded
// by the API's limits on bodies and time like every route; the channel
// bounds what is its own.
type Inbound interface {
	Handler() http.Handler
}

// Rooted is an Inbound served at a root of its own (Root, as "/inbox":
// the pattern and everything under it) rather than under
// /channels/<name>/, for routes a product's pages link to. The root must
// be no route of the service's; a clash stops the process at start.
type Rooted interface {
	Inbound
	Root() string
}

// Streaming is an Inbound with long-lived responses (server-sent
// events): the API leaves the time of its requests to the channel, which
// bounds each of its routes itself (a stream's lifetime, a call's
// deadline) and says so in docs/security.md. CloseStreams ends the open
// streams when the server shuts down, which would otherwise wait for
// them.
type Streaming interface {
	Inbound
	CloseStreams()
}

// Unread is what a ReadTracker knows of one message to a person.
type Unread uint8

const (
	// NotDelivered: the channel has no such message for the person (not
	// yet written, or already gone).
	NotDelivered Unread = iota
	// IsUnread: delivered, and the person has not read it.
	IsUnread
	// IsRead: read, or put away (archived) unread.
	IsRead
)

// ReadTracker is a channel that knows whether a person read a message
// (an in-app inbox). An event posted with "email_if_unread_after" goes
// to such a channel first; its readers who also chose e-mail for the
// topic are mailed only if, when the time is up, the channel answers
// IsUnread for the event's key.
type ReadTracker interface {
	Unread(ctx context.Context, p Person, key string) (Unread, error)
}
