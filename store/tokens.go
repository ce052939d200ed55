package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/adminauth"
)

// MaxTokens is how many stored tokens there may be: a list a person reads.
const MaxTokens = 1000

// Errors of the stored tokens.
var (
	ErrTokenNameTaken = errors.New("a token with this name exists")
	ErrTokenNotFound  = errors.New("no token with this name")
	ErrTooManyTokens  = fmt.Errorf("at most %d tokens", MaxTokens)
)

// Tokens are the API's and the console's stored tokens (`newsletter token
// create`): only a token's SHA-256 hash is kept (adminauth.HashToken),
// with its name, role and creation time. There is no cache anywhere: a
// revoked token fails from the next request on.
type Tokens interface {
	// CreateToken stores a token by its hash as t.Name with t.Role,
	// created now (t.Created is ignored). ErrTokenNameTaken, ErrTooManyTokens;
	// the caller checked the name (adminauth.CheckTokenName) and role.
	CreateToken(ctx context.Context, hash string, t adminauth.StoredToken) (adminauth.StoredToken, error)
	// LookupToken is the holder of the token whose hash is hash, or
	// adminauth.ErrUnknownToken (adminauth.TokenStore).
	LookupToken(ctx context.Context, hash string) (adminauth.Principal, error)
	// ListTokens is every token, oldest first (names break ties).
	ListTokens(ctx context.Context) ([]adminauth.StoredToken, error)
	// RevokeToken deletes the token named name (ErrTokenNotFound).
	RevokeToken(ctx context.Context, name string) error
}

// createTokenScript stores a token.
//
//	KEYS[1]  keyTokens
//	KEYS[2]  keyTokenNames
//	ARGV[1]  the token's hash
//	ARGV[2]  name
//	ARGV[3]  the record (role SEP created SEP name)
//	ARGV[4]  MaxTokens
//
// Answers 'ok', 'taken' (the name, or, by a one in 2^256 chance, the
// hash) or 'full'.
var createTokenScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 'taken' end
if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[4]) then return 'full' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])
return 'ok'
`)

// revokeTokenScript deletes a token by its name.
//
//	KEYS[1]  keyTokens
//	KEYS[2]  keyTokenNames
//	ARGV[1]  name
//
// Answers 1, or 0 when there is no such token.
var revokeTokenScript = redis.NewScript(`
local h = redis.call('HGET', KEYS[2], ARGV[1])
if not h then return 0 end
redis.call('HDEL', KEYS[1], h)
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
`)

// CreateToken implements Tokens.
func (r *Redis) CreateToken(ctx context.Context, hash string, t adminauth.StoredToken) (adminauth.StoredToken, error) {
	t.Created = r.now().Truncate(time.Millisecond)
	rec := strings.Join([]string{string(t.Role), at36(t.Created), t.Name}, recordSep)
	res, err := createTokenScript.Run(ctx, r.rdb, []string{keyTokens, keyTokenNames}, hash, t.Name, rec, MaxTokens).Text()
	switch {
	case err != nil:
		return adminauth.StoredToken{}, err
	case res == "taken":
		return adminauth.StoredToken{}, ErrTokenNameTaken
	case res == "full":
		return adminauth.StoredToken{}, ErrTooManyTokens
	}
	return t, nil
}

// LookupToken implements Tokens: one HGET, on every request.
func (r *Redis) LookupToken(ctx context.Context, hash string) (adminauth.Principal, error) {
	v, err := r.rdb.HGet(ctx, keyTokens, hash).Result()
	if errors.Is(err, redis.Nil) {
		return adminauth.Principal{}, adminauth.ErrUnknownToken
	}
	if err != nil {
		return adminauth.Principal{}, err
	}
	t, err := parseToken(v)
	return adminauth.Principal{Name: t.Name, Role: t.Role}, err
}

// ListTokens implements Tokens.
func (r *Redis) ListTokens(ctx context.Context) ([]adminauth.StoredToken, error) {
	all, err := r.rdb.HVals(ctx, keyTokens).Result()
	if err != nil {
		return nil, err
	}
	list := make([]adminauth.StoredToken, 0, len(all))
	for _, v := range all {
		t, err := parseToken(v)
		if err != nil {
			return nil, err
		}
		list = append(list, t)
	}
	SortTokens(list)
	return list, nil
}

// SortTokens orders tokens as ListTokens answers them.
func SortTokens(list []adminauth.StoredToken) {
	slices.SortFunc(list, func(a, b adminauth.StoredToken) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// RevokeToken implements Tokens.
func (r *Redis) RevokeToken(ctx context.Context, name string) error {
	n, err := revokeTokenScript.Run(ctx, r.rdb, []string{keyTokens, keyTokenNames}, name).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrTokenNotFound
	}
	return nil
}

func parseToken(v string) (adminauth.StoredToken, error) {
	f := strings.SplitN(v, recordSep, 3)
	if len(f) != 3 {
		return adminauth.StoredToken{}, fmt.Errorf("token record %q: not role, created, name", v)
	}
	return adminauth.StoredToken{Role: adminauth.Role(f[0]), Created: unixMilli(f[1], 36), Name: f[2]}, nil
}
