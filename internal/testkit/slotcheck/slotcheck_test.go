package slotcheck_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/embedded"
	"github.com/newsletter/newsletter/internal/testkit/rediscluster"
	"github.com/newsletter/newsletter/internal/testkit/slotcheck"
)

// TestSlot checks Slot against the values the Redis documentation and the
// cluster specification give.
func TestSlot(t *testing.T) {
	for _, c := range []struct {
		key  string
		want int
	}{
		{"foo", 12182},                 // the cluster tutorial: set foo bar, redirected to slot 12182
		{"hello", 866},                 // set hello world, redirected to slot 866
		{"somekey", 11058},             // CLUSTER KEYSLOT's documentation
		{"foo{hash_tag}", 2515},        // likewise
		{"123456789", 0x31C3 & 0x3FFF}, // the CRC16 check value of the specification
		{"", 0},
	} {
		if got := slotcheck.Slot(c.key); got != c.want {
			t.Errorf("Slot(%q) = %d, want %d", c.key, got, c.want)
		}
	}
	// The hash tag rules of the specification.
	same := [][2]string{
		{"{user1000}.following", "{user1000}.followers"},
		{"{user1000}.following", "user1000"},
		{"foo{bar}{zap}", "bar"},      // only the first tag
		{"foo{{bar}}zap", "{bar"},     // from the first '{' to the first '}'
		{"{}foo", "{}foo"},            // trivially; see below
		{"foo{hash_tag}", "hash_tag"}, // the documented example
	}
	for _, p := range same {
		if a, b := slotcheck.Slot(p[0]), slotcheck.Slot(p[1]); a != b {
			t.Errorf("Slot(%q) = %d, Slot(%q) = %d, want equal", p[0], a, p[1], b)
		}
	}
	// An empty tag does not count: the whole key is hashed.
	for _, c := range [][2]string{{"{}foo", "foo"}, {"foo{}{bar}", "bar"}, {"foo{", "foo"}, {"foo}bar{", "bar"}} {
		if slotcheck.Slot(c[0]) == slotcheck.Slot(c[1]) {
			t.Errorf("Slot(%q) = Slot(%q) = %d: the whole key should be hashed", c[0], c[1], slotcheck.Slot(c[0]))
		}
	}
}

// TestSlotMatchesCluster checks Slot against CLUSTER KEYSLOT of a real
// cluster on random keys, tagged and not (skipped without redis-server).
func TestSlotMatchesCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := rediscluster.Start(t).Client(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab{}:0xé\x00"
	for i := range 300 {
		b := make([]byte, r.IntN(12))
		for j := range b {
			b[j] = alphabet[r.IntN(len(alphabet))]
		}
		key := fmt.Sprintf("%s%d", b, i%7)
		want, err := cl.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", key, err)
		}
		if got := slotcheck.Slot(key); int64(got) != want {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT = %d", key, got, want)
		}
	}
}

func TestKeys(t *testing.T) {
	for _, c := range []struct {
		args []any
		want []string
	}{
		{[]any{"get", "a"}, []string{"a"}},
		{[]any{"ping"}, nil},
		{[]any{"flushdb"}, nil},
		{[]any{"DEL", "a", "b"}, []string{"a", "b"}},
		{[]any{"mset", "a", 1, "b", 2}, []string{"a", "b"}},
		{[]any{"evalsha", "abc", 2, "a", "b", "x"}, []string{"a", "b"}},
		{[]any{"eval", "return 1", "0", "x"}, []string{}},
		{[]any{"fcall", "f", 1, "a", "x"}, []string{"a"}},
		{[]any{"zunionstore", "d", 2, "a", "b", "weights", 1, 2}, []string{"d", "a", "b"}},
		{[]any{"zinter", 2, "a", "b", "withscores"}, []string{"a", "b"}},
		{[]any{"bitop", "and", "d", "a", "b"}, []string{"d", "a", "b"}},
		{[]any{"blpop", "a", "b", 0}, []string{"a", "b"}},
		{[]any{"blmpop", 0, 2, "a", "b", "left"}, []string{"a", "b"}},
		{[]any{"copy", "a", "b", "replace"}, []string{"a", "b"}},
		{[]any{"xread", "count", 1, "streams", "a", "b", "0", "0"}, []string{"a", "b"}},
	} {
		got := slotcheck.Keys(c.args)
		if !slices.Equal(got, c.want) {
			t.Errorf("Keys(%v) = %q, want %q", c.args, got, c.want)
		}
	}
}

// Keys in different slots, and in one ({t}-tagged).
const (
	k1, k2   = "foo", "hello"
	t1, t2   = "{t}a", "{t}b"
	scriptSh = "-- touches two keys\nredis.call('SET', KEYS[1], 1)\nredis.call('SET', KEYS[2], 1)\nreturn 1"
)

func TestHook(t *testing.T) {
	// The hook works on the client, so any Redis serves: an in-process
	// one, which needs no database number of its own.
	m, err := embedded.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	named := redis.NewScript("return #KEYS -- named")
	unnamed := redis.NewScript(scriptSh)
	check := slotcheck.New(slotcheck.ScriptNames(map[string]*redis.Script{"namedScript": named}))
	c.AddHook(check.Hook())
	ctx := context.Background()

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Set(ctx, k1, 1, 0).Err())      // one key
	must(c.MSet(ctx, t1, 1, t2, 2).Err()) // one slot
	must(c.Del(ctx, k1, k2).Err())        // crosses
	must(c.Del(ctx, k1, k2).Err())        // again: one violation, two calls
	must(named.Run(ctx, c, []string{k1, k2}).Err())
	must(named.Run(ctx, c, []string{t1, t2}).Err()) // the same script in one slot
	must(unnamed.Run(ctx, c, []string{k1, t1}).Err())
	fresh := redis.NewScript("return 2 -- fresh")
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		fresh.EvalSha(ctx, p, []string{k1, k2}) // NOSCRIPT: not counted
		return nil
	})
	if !redis.HasErrorPrefix(err, "NOSCRIPT") {
		t.Fatalf("EVALSHA of a script not loaded: %v, want NOSCRIPT", err)
	}
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, k1, 1, 0)
		p.Set(ctx, k2, 1, 0) // a plain pipeline is split by slot: fine
		p.Exists(ctx, t1, k2)
		return nil
	})
	must(err)
	_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, t1, 1, 0)
		p.Set(ctx, t2, 1, 0)
		return nil
	})
	must(err)
	_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, k1, 1, 0)
		p.Incr(ctx, k2)
		named.EvalSha(ctx, p, []string{k1})
		return nil
	})
	if err != nil && !redis.HasErrorPrefix(err, "NOSCRIPT") {
		t.Fatal(err)
	}

	got := map[string]slotcheck.Violation{}
	for _, v := range check.Violations() {
		got[v.Name] = v
	}
	unnamedName := fmt.Sprintf("script %.12s (touches two keys)", unnamed.Hash())
	want := []string{"del", "exists", "multi(incr+script namedScript+set)", unnamedName, "script namedScript"}
	if names := check.Names(); !slices.Equal(names, want) {
		t.Fatalf("Names() = %q, want %q\n%v", names, want, check.Violations())
	}
	if v := got["del"]; v.Calls != 2 || !slices.Equal(v.Keys, []string{k1, k2}) ||
		!slices.Equal(v.Slots, []int{slotcheck.Slot(k1), slotcheck.Slot(k2)}) {
		t.Errorf("del: %+v", v)
	}
	if v := got["script namedScript"]; v.Calls != 1 || v.SHA != named.Hash() || v.Command != "eval" {
		t.Errorf("namedScript: %+v (the call in one slot is no violation)", v)
	}
	if v := got[unnamedName]; v.Source != "touches two keys" || v.Calls != 1 {
		t.Errorf("unnamed script: %+v, want one call (its EVALSHA answered NOSCRIPT) and its first comment line as Source", v)
	}
}
