package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/inbox"
	"github.com/newsletter/newsletter/internal/config"
	"github.com/newsletter/newsletter/services/subscribers"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// addedChannels are the channels added through the seam: each is its
// package under channels/ and one line here (docs/architecture.md,
// "Adding a channel"). The binary gives each a lane, a queue and a task
// type of its name, its readers' tasks from the fan-out, a place in the
// events API and the preference centre, and its routes under
// /channels/<name>/.
var addedChannels = []channels.Plugin{inbox.Plugin}

var (
	registerOnce sync.Once
	registerErr  error
	// onChannels are the added channels on in this process (each
	// Plugin's On), decided once by registerChannels.
	onChannels []channels.Plugin
)

// registerChannels registers the added channels that are on (each
// Plugin's On, read from getenv) with their lanes, queues and task types
// (tasks.AddChannel), once per process and before anything reads them:
// the first thing run does.
func registerChannels(getenv func(string) string) error {
	registerOnce.Do(func() {
		for _, p := range addedChannels {
			if p.New == nil {
				registerErr = errors.Join(registerErr, fmt.Errorf("channel %q: no New", p.Name))
				continue
			}
			if p.On != nil && !p.On(getenv) {
				continue
			}
			_, err := tasks.AddChannel(tasks.ChannelInfo{Name: p.Name, Label: p.Label, DefaultOn: p.DefaultOn})
			registerErr = errors.Join(registerErr, err)
			onChannels = append(onChannels, p)
		}
	})
	return registerErr
}

// laneSize is an added channel's lane: its pool and shared rate.
type laneSize struct{ concurrency, rate int }

// defaultAddedWorkers is an added channel's pool when its Plugin names none.
const defaultAddedWorkers = 4

// addedLaneSizes are the lanes' sizes of the channels plugins: each
// Plugin's, or NEWSLETTER_<NAME>_CONCURRENCY and NEWSLETTER_<NAME>_RATE.
func addedLaneSizes(getenv func(string) string, plugins []channels.Plugin) (map[string]laneSize, error) {
	out := map[string]laneSize{}
	var errs []error
	for _, p := range plugins {
		l := laneSize{concurrency: p.Workers, rate: p.Rate}
		if l.concurrency <= 0 {
			l.concurrency = defaultAddedWorkers
		}
		prefix := "NEWSLETTER_" + strings.ToUpper(p.Name)
		for _, v := range []struct {
			name string
			to   *int
			min  int
		}{{prefix + "_CONCURRENCY", &l.concurrency, 1}, {prefix + "_RATE", &l.rate, 0}} {
			s := getenv(v.name)
			if s == "" {
				continue
			}
			n, err := strconv.Atoi(s)
			if err != nil || n < v.min || n > 10000 {
				errs = append(errs, config.Invalid(v.name, fmt.Sprintf("a whole number from %d to 10000, got %q", v.min, s)))
				continue
			}
			*v.to = n
		}
		out[p.Name] = l
	}
	return out, errors.Join(errs...)
}

// buildAdded builds the added channels (each Plugin's New), once per
// process: the worker sends through them, the API serves their routes.
func buildAdded(a *app, getenv func(string) string) ([]channels.Channel, error) {
	var out []channels.Channel
	for _, p := range onChannels {
		c, err := p.New(channels.Env{Redis: a.rdb, BaseURL: a.cfg.BaseURL, Getenv: getenv, Log: a.log.With("channel", p.Name), People: channelPeople{a}})
		if err != nil {
			return nil, fmt.Errorf("channel %s: %w", p.Name, err)
		}
		if got := c.Spec().Name; got != p.Name {
			return nil, fmt.Errorf("channel %s: its Spec says %q", p.Name, got)
		}
		out = append(out, c)
	}
	return out, nil
}

// channelPeople finds a channel's people in the store (channels.People).
type channelPeople struct{ a *app }

func (p channelPeople) ByEmail(ctx context.Context, email string) (channels.Person, error) {
	sub, err := p.a.store.Get(ctx, email)
	if errors.Is(err, store.ErrNotFound) {
		return channels.Person{}, channels.ErrNoPerson
	}
	if err != nil {
		return channels.Person{}, err
	}
	return channels.Person{ID: sub.ID, Email: sub.Email, Timezone: sub.Timezone}, nil
}

// mountAddedRoutes serves each added channel's own routes (a
// channels.Inbound) under /channels/<name>/, or its root (a
// channels.Rooted); a channels.Streaming one bounds its own time (and
// listen ends its streams when the server shuts down).
func mountAddedRoutes(a *app, srv *api.Server) {
	for _, c := range a.added {
		in, ok := c.(channels.Inbound)
		if !ok {
			continue
		}
		prefix := "/channels/" + c.Spec().Name
		if r, ok := c.(channels.Rooted); ok {
			prefix = r.Root()
		}
		h := http.StripPrefix(prefix, in.Handler())
		handle := srv.Handle
		if _, ok := c.(channels.Streaming); ok {
			handle = srv.HandleUntimed
		}
		handle(prefix+"/", h)
		if _, ok := c.(channels.Rooted); ok {
			handle(prefix, h)
		}
	}
}

// channelData is an added channel as the person's export and erase see
// it: what it keeps of a person, if it keeps anything
// (channels.Exporter, channels.Eraser).
type channelData struct{ c channels.Channel }

func (d channelData) Name() string { return d.c.Spec().Name }

func (d channelData) Export(ctx context.Context, id int64, email string) (any, error) {
	if e, ok := d.c.(channels.Exporter); ok {
		return e.Export(ctx, channels.Person{ID: id, Email: email})
	}
	return nil, nil
}

func (d channelData) Erase(ctx context.Context, id int64, email string) error {
	if e, ok := d.c.(channels.Eraser); ok {
		return e.Erase(ctx, channels.Person{ID: id, Email: email})
	}
	return nil
}

// personData are the added channels that keep something of a person.
func personData(a *app) []subscribers.PersonData {
	var out []subscribers.PersonData
	for _, c := range a.added {
		_, exports := c.(channels.Exporter)
		_, erases := c.(channels.Eraser)
		if exports || erases {
			out = append(out, channelData{c})
		}
	}
	return out
}

// addedNames are the added channels' names.
func addedNames() []string {
	var out []string
	for _, p := range onChannels {
		out = append(out, p.Name)
	}
	return out
}

// readTrackers are the added channels that know whether a reader read a
// message (channels.ReadTracker): an event may hold its e-mail on them.
func readTrackers(a *app) []string {
	var out []string
	for _, c := range a.added {
		if _, ok := c.(channels.ReadTracker); ok {
			out = append(out, c.Spec().Name)
		}
	}
	return out
}
