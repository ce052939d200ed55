// Package slotcheck finds the Redis commands, Lua scripts and transactions
// a Redis Cluster would refuse with CROSSSLOT because their keys hash to
// more than one slot. It is a go-redis hook, so it sees what the code
// sends wherever it runs: on one Redis, and on miniredis, neither of
// which refuses anything for its slots, the hook still tells what a
// cluster would (issue #30).
//
// A command names its keys where the Redis command table says (the
// multi-key commands are listed in keys.go; every other command names at
// most its first argument, and one key is always in one slot). A script's
// keys are its KEYS: what a script reaches by a key name it builds itself
// (not passed in KEYS) is not seen here, and a cluster refuses that too
// unless the key is in the slot of the script's KEYS. A transaction
// (MULTI … EXEC, go-redis's TxPipelined) is one check over all of its
// commands' keys, since go-redis's cluster client refuses one whose keys
// are in more than one slot; a plain pipeline is not, since the cluster
// client splits it by slot.
package slotcheck

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Violation is one command, script or transaction seen with keys in more
// than one slot.
type Violation struct {
	// Name names it stably: a command's lower-case name ("del"); for a
	// script "script " and its name (Names) or, when it has none, its SHA1
	// and first line; for a transaction "multi(" and its commands' names,
	// sorted, joined by "+" ")".
	Name    string
	Command string // the first crossing call's lower-case command ("eval", "evalsha", "del"; "multi" for a transaction)
	SHA     string // a script's SHA1 (EVAL's computed from its source)
	// Source is a script's first line, when its source was seen (EVAL,
	// which go-redis sends after EVALSHA answers NOSCRIPT).
	Source string
	Keys   []string // the keys of the first crossing call
	Slots  []int    // their slots, in the order of Keys
	Calls  int      // how many crossing calls were seen (an EVALSHA answered NOSCRIPT is none: its EVAL is)
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d calls):", v.Name, v.Calls)
	for i, k := range v.Keys {
		fmt.Fprintf(&b, " %s@%d", k, v.Slots[i])
	}
	return b.String()
}

// Check is a redis.Hook that records violations. It is safe for
// concurrent use.
type Check struct {
	names map[string]string // SHA1 -> script name, from New

	mu      sync.Mutex
	sources map[string]string     // SHA1 -> first line of the script, from EVAL
	seen    map[string]*Violation // by id (see id), in order of order
	order   []string
}

// New returns a Check that names the scripts whose SHA1 is in names
// (ScriptNames makes it from the scripts); nil names none.
func New(names map[string]string) *Check {
	return &Check{names: names, sources: map[string]string{}, seen: map[string]*Violation{}}
}

// ScriptNames maps each script's SHA1 to its name, for New.
func ScriptNames(scripts map[string]*redis.Script) map[string]string {
	out := make(map[string]string, len(scripts))
	for name, s := range scripts {
		out[s.Hash()] = name
	}
	return out
}

// Hook returns the hook to add to a client (redis.Client.AddHook).
func (c *Check) Hook() redis.Hook { return hook{c} }

// Violations returns what crossed slots, one per distinct command, script
// or transaction, in the order first seen.
func (c *Check) Violations() []Violation {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Violation, 0, len(c.order))
	for _, id := range c.order {
		v := *c.seen[id]
		v.Keys, v.Slots = slices.Clone(v.Keys), slices.Clone(v.Slots)
		if v.SHA != "" {
			v.Source = c.sources[v.SHA]
		}
		v.Name = c.nameLocked(id, v)
		out = append(out, v)
	}
	return out
}

// Names returns the distinct names of Violations, sorted.
func (c *Check) Names() []string {
	var out []string
	for _, v := range c.Violations() {
		out = append(out, v.Name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// nameLocked names a violation when asked rather than when seen: a
// script's source (for its first line) arrives after the EVALSHA that
// crossed, with the EVAL go-redis sends on NOSCRIPT.
func (c *Check) nameLocked(id string, v Violation) string {
	if v.Command != "multi" {
		return c.cmdNameLocked(id)
	}
	var parts []string
	for _, p := range strings.Split(strings.TrimPrefix(id, "multi "), "+") {
		parts = append(parts, c.cmdNameLocked(p))
	}
	slices.Sort(parts)
	return "multi(" + strings.Join(slices.Compact(parts), "+") + ")"
}

// cmdNameLocked names one command by its id: "evalsha <sha1>" for a
// script, else the command's name.
func (c *Check) cmdNameLocked(id string) string {
	sha, ok := strings.CutPrefix(id, "evalsha ")
	if !ok {
		return id
	}
	if n := c.names[sha]; n != "" {
		return "script " + n
	}
	if src := c.sources[sha]; src != "" {
		return fmt.Sprintf("script %.12s (%s)", sha, src)
	}
	return "script " + sha
}

// scriptCmds are the commands that run a script; the first arg after the
// name is the script (EVAL) or its SHA1 (EVALSHA).
var scriptCmds = map[string]bool{"eval": true, "eval_ro": true, "evalsha": true, "evalsha_ro": true}

// id identifies a command for Violations: "evalsha <sha1>" for a script
// however it was sent (EVAL, EVALSHA, their _RO forms), "fcall <function>"
// for a function, else the command's name. It records EVAL's source.
func (c *Check) id(args []any) (id, cmd, sha string) {
	cmd = strings.ToLower(str(args[0]))
	if len(args) < 2 {
		return cmd, cmd, ""
	}
	switch {
	case scriptCmds[cmd]:
		body := str(args[1])
		if strings.HasPrefix(cmd, "eval_") || cmd == "eval" {
			sum := sha1.Sum([]byte(body))
			sha = hex.EncodeToString(sum[:])
			c.mu.Lock()
			if _, ok := c.sources[sha]; !ok {
				c.sources[sha] = firstLine(body)
			}
			c.mu.Unlock()
		} else {
			sha = strings.ToLower(body)
		}
		return "evalsha " + sha, cmd, sha
	case cmd == "fcall" || cmd == "fcall_ro":
		return "fcall " + str(args[1]), cmd, ""
	}
	return cmd, cmd, ""
}

// firstLine is what names a script without a name: its first comment
// line if it has one, else its first non-empty line, at most 60 bytes.
func firstLine(src string) string {
	var first string
	for l := range strings.Lines(src) {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if c, ok := strings.CutPrefix(l, "--"); ok {
			first = strings.TrimSpace(c)
			break
		}
		if first == "" {
			first = l
		}
	}
	if len(first) > 60 {
		first = first[:60]
	}
	return first
}

// record notes a call under id when keys cross slots.
func (c *Check) record(id, cmd, sha string, keys []string) {
	if len(keys) < 2 {
		return
	}
	slots := make([]int, len(keys))
	for i, k := range keys {
		slots[i] = Slot(k)
	}
	if !slices.ContainsFunc(slots, func(s int) bool { return s != slots[0] }) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.seen[id]
	if v == nil {
		v = &Violation{Command: cmd, SHA: sha, Keys: keys, Slots: slots}
		c.seen[id] = v
		c.order = append(c.order, id)
	}
	v.Calls++
}

// one checks a command on its own, once it was answered (err), and
// returns its id and keys. An EVALSHA answered NOSCRIPT is not counted:
// go-redis sends the script again as EVAL, which is, so one run of a
// script is one call.
func (c *Check) one(cmd redis.Cmder, err error) (id string, keys []string) {
	args := cmd.Args()
	if len(args) == 0 {
		return "", nil
	}
	id, name, sha := c.id(args)
	keys = Keys(args)
	if !redis.HasErrorPrefix(err, "NOSCRIPT") {
		c.record(id, name, sha, keys)
	}
	return id, keys
}

// many checks a pipeline's commands each on its own and, for a
// transaction, all of them together.
func (c *Check) many(cmds []redis.Cmder) {
	tx := len(cmds) > 0 && strings.EqualFold(cmds[0].Name(), "multi")
	var ids, keys []string
	for _, cmd := range cmds {
		id, k := c.one(cmd, cmd.Err())
		if id == "" || id == "multi" || id == "exec" {
			continue
		}
		ids = append(ids, id)
		for _, k := range k {
			if !slices.Contains(keys, k) { // each key once, for a readable report
				keys = append(keys, k)
			}
		}
	}
	if !tx {
		return
	}
	slices.Sort(ids)
	c.record("multi "+strings.Join(slices.Compact(ids), "+"), "multi", "", keys)
}

type hook struct{ c *Check }

// DialHook implements redis.Hook.
func (h hook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// The error next returns, not cmd.Err(): go-redis sets the
		// command's error only once the hooks have returned.
		err := next(ctx, cmd)
		h.c.one(cmd, err)
		return err
	}
}

// ProcessPipelineHook implements redis.Hook, for pipelines and
// transactions (whose first command is MULTI).
func (h hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.c.many(cmds)
		return err
	}
}

var _ redis.Hook = hook{}
