package store

import (
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Unavailable tells whether err, from the store or any other Redis call,
// means Redis could not be reached or could not answer yet: a refused or
// dropped connection, a timeout, a Redis still loading its data after a
// restart, a replica that was the primary before a failover, or a Redis
// Cluster failing over. Such an error says nothing about the operation, which may be
// tried again as it is once Redis is back; unlike a refusal (a script
// error, a full disk), waiting is the whole cure.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, redis.ErrClosed):
		return true
	}
	var re redis.Error
	if errors.As(err, &re) {
		// The replies of a Redis that is up but not serving yet, of
		// a primary demoted by a Sentinel failover to a client that has
		// not yet moved to the new one (READONLY), and of every node of
		// a Redis Cluster while a primary is lost and its replica not
		// yet promoted (CLUSTERDOWN, some seconds: every slot refused,
		// not only the lost primary's).
		msg := re.Error()
		return strings.HasPrefix(msg, "LOADING ") || strings.HasPrefix(msg, "BUSY ") || strings.HasPrefix(msg, "MASTERDOWN ") ||
			strings.HasPrefix(msg, "READONLY ") || strings.HasPrefix(msg, "CLUSTERDOWN ")
	}
	// asynq hands the error of its scripts (an enqueue) over as text,
	// "redis eval error: " and go-redis's message: what it met is known
	// only by that text.
	if _, cause, ok := strings.Cut(err.Error(), "redis eval error: "); ok {
		return slices.ContainsFunc(unreachableTexts, func(s string) bool { return strings.Contains(cause, s) })
	}
	return false
}

// unreachableTexts are the messages of the errors above.
var unreachableTexts = []string{
	syscall.ECONNREFUSED.Error(), syscall.ECONNRESET.Error(), syscall.EPIPE.Error(), "i/o timeout", io.EOF.Error(),
	redis.ErrClosed.Error(), "LOADING ", "BUSY ", "MASTERDOWN ", "READONLY ", "CLUSTERDOWN ",
}
