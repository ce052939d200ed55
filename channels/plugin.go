package channels

import (
	"context"
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
}

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
