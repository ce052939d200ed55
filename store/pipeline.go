package store

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// runPipelined runs script once per argument list in one pipeline and
// returns the commands in order. A pipeline is not atomic: when the
// server's script cache is cold, some EVALSHAs fail with NOSCRIPT while
// others (after a concurrent load) succeed, so only the failed ones are run
// again, one by one through Run (which loads the script). Running the whole
// pipeline again would apply the successful ones twice.
func runPipelined(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, keys func(i int) []string, args [][]any) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(args))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, a := range args {
			cmds[i] = script.EvalSha(ctx, p, keys(i), a...)
		}
		return nil
	})
	if err != nil && !isReplyErr(err) {
		return nil, err // the connection failed: nothing is known
	}
	for i, c := range cmds {
		if c.Err() != nil && strings.HasPrefix(c.Err().Error(), "NOSCRIPT") {
			cmds[i] = script.Run(ctx, rdb, keys(i), args[i]...)
		}
	}
	return cmds, nil
}

// isReplyErr tells an error reply of one command (the others still ran)
// from a connection failure.
func isReplyErr(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
