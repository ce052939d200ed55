package slotcheck

import (
	"fmt"
	"strconv"
	"strings"
)

// keyPos says where a multi-key command's keys are among its arguments
// (args[0] is the command's name).
type keyPos int

const (
	allKeys          keyPos = iota // every argument after the name: DEL k1 k2 …
	firstTwo                       // the first two: RENAME src dst, COPY src dst [DB n] [REPLACE]
	allButLast                     // all but the last (a timeout): BLPOP k1 k2 timeout
	everyOther                     // the 1st, 3rd, …: MSET k1 v1 k2 v2
	fromSecond                     // from the second on: BITOP op dest k1 k2
	numKeysAt2                     // a count at args[2], then the keys: EVAL script n k1 … (and the dest at args[1] for *STORE)
	numKeysAt1                     // a count at args[1], then the keys: ZUNION n k1 …, LMPOP n k1 …
	numKeysAt2NoDest               // a timeout at args[1], a count at args[2]: BLMPOP timeout n k1 …
	streams                        // XREAD … STREAMS k1 k2 id1 id2
)

// multiKey lists the commands that can name more than one key, by where
// their keys are. Every other command names at most one key (its first
// argument) or none, and one key is always in one slot.
var multiKey = map[string]keyPos{
	"del": allKeys, "unlink": allKeys, "exists": allKeys, "touch": allKeys,
	"mget": allKeys, "watch": allKeys, "pfcount": allKeys, "pfmerge": allKeys,
	"sunion": allKeys, "sinter": allKeys, "sdiff": allKeys,
	"sunionstore": allKeys, "sinterstore": allKeys, "sdiffstore": allKeys,

	"rename": firstTwo, "renamenx": firstTwo, "rpoplpush": firstTwo,
	"lmove": firstTwo, "blmove": firstTwo, "brpoplpush": firstTwo,
	"smove": firstTwo, "copy": firstTwo, "geosearchstore": firstTwo,
	"zrangestore": firstTwo,

	"blpop": allButLast, "brpop": allButLast, "bzpopmin": allButLast, "bzpopmax": allButLast,

	"mset": everyOther, "msetnx": everyOther,

	"bitop": fromSecond,

	"eval": numKeysAt2, "evalsha": numKeysAt2, "eval_ro": numKeysAt2, "evalsha_ro": numKeysAt2,
	"fcall": numKeysAt2, "fcall_ro": numKeysAt2,
	"zunionstore": numKeysAt2, "zinterstore": numKeysAt2, "zdiffstore": numKeysAt2,

	"zunion": numKeysAt1, "zinter": numKeysAt1, "zdiff": numKeysAt1,
	"zintercard": numKeysAt1, "sintercard": numKeysAt1, "lmpop": numKeysAt1, "zmpop": numKeysAt1,

	"blmpop": numKeysAt2NoDest, "bzmpop": numKeysAt2NoDest,

	"xread": streams, "xreadgroup": streams,
}

// keyless lists the commands that name no key, so that a transaction's
// keys (all of its commands') do not take their first argument for one.
var keyless = map[string]bool{
	"ping": true, "echo": true, "hello": true, "auth": true, "select": true,
	"client": true, "readonly": true, "readwrite": true, "info": true,
	"script": true, "function": true, "flushdb": true, "flushall": true,
	"dbsize": true, "time": true, "cluster": true, "command": true,
	"config": true, "multi": true, "exec": true, "discard": true,
	"unwatch": true, "keys": true, "scan": true, "randomkey": true,
	"publish": true, "spublish": true, "subscribe": true, "psubscribe": true,
	"unsubscribe": true, "punsubscribe": true, "wait": true, "waitaof": true,
	"swapdb": true, "save": true, "bgsave": true, "lastsave": true,
	"memory": true, "slowlog": true, "latency": true, "debug": true,
	"quit": true, "reset": true, "monitor": true, "role": true,
}

// Keys returns the keys a command names, from its arguments as go-redis
// holds them (args[0] is the name): by the table of multi-key commands,
// else its first argument, or none for a keyless command.
func Keys(args []any) []string {
	if len(args) == 0 {
		return nil
	}
	name := strings.ToLower(str(args[0]))
	rest := args[1:]
	pos, ok := multiKey[name]
	if !ok {
		if keyless[name] || len(rest) == 0 {
			return nil
		}
		return []string{str(rest[0])}
	}
	var keys []any
	switch pos {
	case allKeys:
		keys = rest
	case firstTwo:
		keys = rest[:min(2, len(rest))]
	case allButLast:
		if len(rest) > 0 {
			keys = rest[:len(rest)-1]
		}
	case everyOther:
		for i := 0; i < len(rest); i += 2 {
			keys = append(keys, rest[i])
		}
	case fromSecond:
		if len(rest) > 1 {
			keys = rest[1:]
		}
	case numKeysAt2:
		if len(rest) < 2 {
			return nil
		}
		if strings.HasSuffix(name, "store") {
			keys = append(keys, rest[0]) // the destination
		}
		keys = append(keys, counted(rest[1], rest[2:])...)
	case numKeysAt1:
		if len(rest) < 1 {
			return nil
		}
		keys = counted(rest[0], rest[1:])
	case numKeysAt2NoDest:
		if len(rest) < 2 {
			return nil
		}
		keys = counted(rest[1], rest[2:])
	case streams:
		for i, a := range rest {
			if strings.EqualFold(str(a), "streams") {
				after := rest[i+1:]
				keys = after[:len(after)/2] // the keys, then as many ids
				break
			}
		}
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = str(k)
	}
	return out
}

// counted returns the first n of args, n the count in arg (all of args
// when arg is no count, so that a malformed command is still looked at).
func counted(arg any, args []any) []any {
	n, err := strconv.Atoi(str(arg))
	if err != nil || n < 0 || n > len(args) {
		return args
	}
	return args[:n]
}

// str renders an argument as go-redis writes it to the wire for the types
// the store uses (strings, byte slices, numbers).
func str(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	default:
		return fmt.Sprint(v)
	}
}
