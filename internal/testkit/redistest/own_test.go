package redistest

import (
	"context"
	"os"
	"os/exec"
	"testing"
)

// TestOwnIsPrivate: two tests that take Own (and so run in parallel)
// each see only their own keys, on Redis URLs of their own.
func TestOwnIsPrivate(t *testing.T) {
	private := os.Getenv(EnvURL) == ""
	if _, err := exec.LookPath("redis-server"); err == nil {
		private = true
	}
	if !private {
		t.Skip("NEWSLETTER_TEST_REDIS_URL is set and redis-server is not on the PATH: Own is New, one test at a time")
	}
	urls := make(chan string, 2)
	t.Run("group", func(t *testing.T) {
		for _, name := range []string{"a", "b"} {
			t.Run(name, func(t *testing.T) {
				c, url := Own(t, DBCommand)
				urls <- url
				ctx := context.Background()
				if err := c.Set(ctx, "who", name, 0).Err(); err != nil {
					t.Fatal(err)
				}
				// Only this test's key, whichever of the two ran first.
				if n, err := c.DBSize(ctx).Result(); err != nil || n != 1 {
					t.Fatalf("%d keys (%v), want only this test's", n, err)
				}
				if got, err := c.Get(ctx, "who").Result(); err != nil || got != name {
					t.Fatalf("who = %q (%v), want %q", got, err, name)
				}
			})
		}
	})
	close(urls)
	var seen []string
	for u := range urls {
		seen = append(seen, u)
	}
	if len(seen) != 2 || seen[0] == seen[1] {
		t.Fatalf("the two tests got %v, want two different Redis URLs", seen)
	}
}
