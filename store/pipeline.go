package store

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// runPipelined runs script once per argument list, pipelined in chunks, and
// returns the commands in order. A pipeline is not atomic: when the
// server's script cache is cold, some EVALSHAs fail with NOSCRIPT while
// others (after a concurrent load) succeed, so only the failed ones are run
// again, one by one through Run (which loads the script). Running the whole
// pipeline again would apply the successful ones twice.
func runPipelined(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, keys func(i int) []string, args [][]any) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(args))
	for lo := 0; lo < len(args); lo += pipelineChunk {
		hi := min(lo+pipelineChunk, len(args))
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := lo; i < hi; i++ {
				cmds[i] = script.EvalSha(ctx, p, keys(i), args[i]...)
			}
			return nil
		})
		if err != nil && !isReplyErr(err) {
			return nil, err // the connection failed: nothing is known
		}
	}
	for i, c := range cmds {
		if c.Err() != nil && strings.HasPrefix(c.Err().Error(), "NOSCRIPT") {
			cmds[i] = script.Run(ctx, rdb, keys(i), args[i]...)
		}
	}
	return cmds, nil
}

// pipelineChunk bounds one round trip of runPipelined. go-redis reads a
// pipeline's replies under one read deadline and sends the whole pipeline
// again when that deadline passes; a round trip of 10,000 scripts on a
// busy Redis can outlast the deadline, and the second sending then finds
// its own first one's work ("already on the list"). 500 scripts take
// milliseconds even on a loaded machine, and cost nothing measurable in
// round trips.
const pipelineChunk = 500

// isReplyErr tells an error reply of one command (the others still ran)
// from a connection failure.
func isReplyErr(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
