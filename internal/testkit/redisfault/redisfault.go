// Package redisfault makes a go-redis client meet a Redis that is away, so
// tests of what rides out an outage run on the real store and broker rather
// than on a copy of them: a hook that makes chosen commands fail as an
// unreachable server does, or wait as a hung one does, switched on and off
// while the client is in use.
//
// A Lua script (EVALSHA, and the EVAL go-redis falls back to) is a command
// like any other. Flaky and Seen count round trips by what they send: each
// script on its own, and a pipeline by the commands in it, so one step's
// outage does not use up another's.
package redisfault

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// ErrUnreachable is what a failing command answers: the error of a dial the
// server refused, which the service takes for Redis being away.
var ErrUnreachable error = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

type mode int

const (
	off mode = iota
	fail
	hang
)

// Fault is a redis.Hook. Its zero value lets every command through; it is
// safe for concurrent use.
type Fault struct {
	mu    sync.Mutex
	mode  mode
	err   error
	names []string // the commands the fault applies to; none: all
	// first > 0: each command meets the fault only its first `first`
	// times since the fault was set (met counts them).
	first   int
	met     map[string]int
	release chan struct{} // closed by Heal: the hung commands go on
	seen    map[string]*Stats
}

// Stats is what the fault saw of one kind of round trip since it was
// added.
type Stats struct {
	Names []string // the commands' names, lower case ("evalsha" for a script)
	Calls int      // how many times it was sent
	Met   int      // how many of those met the fault
}

// Add returns a Fault added to c's hooks, letting everything through.
func Add(c *redis.Client) *Fault {
	f := &Fault{}
	c.AddHook(f)
	return f
}

// Down makes every call of the named commands (none: every command) fail
// with ErrUnreachable until Heal.
func (f *Fault) Down(names ...string) { f.set(fail, ErrUnreachable, 0, names) }

// Flaky makes each of the named commands (none: every command) fail with
// ErrUnreachable its first n times from now, as during a restart that ends
// once a step was tried again.
func (f *Fault) Flaky(n int, names ...string) { f.set(fail, ErrUnreachable, n, names) }

// FlakyWith is Flaky with err for the first n calls: io.EOF, say, as a
// primary that died with the command written and unanswered.
func (f *Fault) FlakyWith(n int, err error, names ...string) { f.set(fail, err, n, names) }

// Refuse makes every call of the named commands (none: every command)
// answer err, as a Redis that is up but refuses (a full disk, a script
// error), until Heal.
func (f *Fault) Refuse(err error, names ...string) { f.set(fail, err, 0, names) }

// Hang makes every call of the named commands (none: every command) wait,
// as for a hung server, until Heal (then it is sent) or until its context
// ends (then it answers the context's error).
func (f *Fault) Hang(names ...string) { f.set(hang, nil, 0, names) }

// Heal lets every command through again, the hung ones too.
func (f *Fault) Heal() { f.set(off, nil, 0, nil) }

func (f *Fault) set(m mode, err error, first int, names []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.release != nil {
		close(f.release)
		f.release = nil
	}
	if m == hang {
		f.release = make(chan struct{})
	}
	f.mode, f.err, f.first, f.met = m, err, first, map[string]int{}
	f.names = make([]string, len(names))
	for i, n := range names {
		f.names[i] = strings.ToLower(n)
	}
}

// Seen returns what the fault saw of each kind of round trip, keyed by the
// command's name ("evalsha <sha1>" for a script), or for a pipeline by
// the distinct commands in it joined by "+" ("setbit+expire").
func (f *Fault) Seen() map[string]Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]Stats, len(f.seen))
	for k, s := range f.seen {
		out[k] = *s
	}
	return out
}

// Calls returns how many round trips sent a command named name (every
// script's for "evalsha" or "eval").
func (f *Fault) Calls(name string) int {
	name = scriptName(strings.ToLower(name))
	n := 0
	for _, s := range f.Seen() {
		if slices.Contains(s.Names, name) {
			n += s.Calls
		}
	}
	return n
}

// scriptName is the one name under which go-redis's two ways of running a
// script count.
func scriptName(name string) string {
	switch name {
	case "eval", "evalsha":
		return "evalsha"
	case "eval_ro", "evalsha_ro":
		return "evalsha_ro"
	}
	return name
}

// key names cmd: its name, and for a script the script's SHA1, so that
// EVAL and the EVALSHA of one script are one command.
func key(cmd redis.Cmder) (name, k string) {
	name = scriptName(strings.ToLower(cmd.Name()))
	args := cmd.Args()
	if len(args) < 2 || name != "evalsha" && name != "evalsha_ro" {
		return name, name
	}
	body := fmt.Sprint(args[1])
	if c := strings.ToLower(cmd.Name()); c == "eval" || c == "eval_ro" {
		sum := sha1.Sum([]byte(body))
		body = hex.EncodeToString(sum[:])
	}
	return name, name + " " + body
}

// setUp are the commands go-redis sends, through the hooks, to set up a
// new connection (depending on the options and the server). They belong to
// the dial, which the fault lets through: what a caller sends is faulted
// and counted the same whichever connection the pool hands it.
var setUp = []string{"hello", "auth", "select", "client", "readonly"}

// check counts cmds as one round trip and says what it meets: nothing (nil
// wait, nil error), a wait for release, or an error.
func (f *Fault) check(cmds []redis.Cmder) (<-chan struct{}, error) {
	var names, keys []string
	for _, c := range cmds {
		name, k := key(c)
		if slices.Contains(setUp, name) {
			continue
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	trip := strings.Join(keys, "+")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[string]*Stats{}
	}
	s := f.seen[trip]
	if s == nil {
		s = &Stats{Names: names}
		f.seen[trip] = s
	}
	s.Calls++
	// The whole round trip meets the fault if one of its commands is
	// named, as a broken connection fails every command of a pipeline.
	if f.mode == off || len(f.names) > 0 && !slices.ContainsFunc(f.names, func(n string) bool { return slices.Contains(names, scriptName(n)) }) ||
		f.first > 0 && f.met[trip] >= f.first {
		return nil, nil
	}
	f.met[trip]++
	s.Met++
	if f.mode == hang {
		return f.release, nil
	}
	return nil, f.err
}

func (f *Fault) meet(ctx context.Context, cmds []redis.Cmder) error {
	wait, err := f.check(cmds)
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err != nil {
		for _, c := range cmds {
			c.SetErr(err)
		}
	}
	return err
}

// DialHook implements redis.Hook: dials are not faulted (a pooled
// connection is the common case; the commands fail either way).
func (f *Fault) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (f *Fault) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := f.meet(ctx, []redis.Cmder{cmd}); err != nil {
			return err
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook, for pipelines and
// transactions alike.
func (f *Fault) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := f.meet(ctx, cmds); err != nil {
			return err
		}
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*Fault)(nil)
