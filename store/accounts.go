package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/adminauth"
)

// Errors of the accounts.
var (
	ErrAccountNotFound = errors.New("no such account")
	ErrAccountExists   = errors.New("an account with this address exists")
	ErrInviteNotFound  = errors.New("no such invite: used, expired or never made")
	ErrTooManyAccounts = fmt.Errorf("at most %d accounts and open invites", MaxAccounts)
)

// MaxAccounts is how many accounts (and, apart, open invites) there may
// be: a list a person reads.
const MaxAccounts = 1000

// Account is a person who signs in to the console. The secrets are as
// stored: the password's argon2id hash, the TOTP secret (base32).
type Account struct {
	ID           int64
	Email        string
	Role         adminauth.Role
	PasswordHash string
	TOTPSecret   string
	// TOTPStep is the last TOTP time step accepted: a code of it or of
	// an earlier step is never accepted again.
	TOTPStep int64
	// PendingTOTP is a new secret waiting for its first code
	// (/admin/account), not yet used for signing in.
	PendingTOTP string
	Created     time.Time
	LastSignIn  time.Time
	Suspended   bool
	// SessionGen grows with each password change: a session made before
	// names an older one and has ended (AccountSessionRef).
	SessionGen int64
}

// Invite is an open invitation, found by its token's hash.
type Invite struct {
	Hash    string
	Email   string
	Role    adminauth.Role
	By      string // who invited (a principal's name)
	Expires time.Time
	// TOTPSecret is the secret the invite page showed the invitee, kept
	// until they confirm it with a code.
	TOTPSecret string
}

// Accounts are the console's accounts and their invites (accounts.go).
type Accounts interface {
	// CreateInvite stores an invite by its token's hash, until
	// inv.Expires. ErrAccountExists when the address has an account,
	// ErrTooManyAccounts.
	CreateInvite(ctx context.Context, inv Invite) error
	// InviteByHash is the open invite with hash (ErrInviteNotFound,
	// ErrInviteRevoked).
	InviteByHash(ctx context.Context, hash string) (Invite, error)
	// InviteSecret keeps secret as the invite's TOTP secret unless it has
	// one, and answers the one it keeps (ErrInviteNotFound).
	InviteSecret(ctx context.Context, hash, secret string) (string, error)
	// ListInvites is the open invites, soonest to expire first.
	ListInvites(ctx context.Context) ([]Invite, error)
	// AcceptInvite turns the invite into an account with the password's
	// hash, the invite's TOTP secret (its first code's step used) and the
	// recovery codes' hashes, and ends the invite: the new account, or
	// ErrInviteNotFound, ErrInviteRevoked, ErrAccountExists.
	AcceptInvite(ctx context.Context, hash, passwordHash string, step int64, recovery []string) (Account, error)
	// Account is the account id (ErrAccountNotFound); AccountByEmail the
	// account with the normalised address email.
	Account(ctx context.Context, id int64) (Account, error)
	AccountByEmail(ctx context.Context, email string) (Account, error)
	// ListAccounts is every account, oldest first.
	ListAccounts(ctx context.Context) ([]Account, error)
	// UseTOTPStep accepts step for the account once: true when it is
	// later than the last step accepted (which it becomes), false for a
	// code used already (a replay).
	UseTOTPStep(ctx context.Context, id, step int64) (bool, error)
	// UseRecoveryCode spends the recovery code with hash: true once,
	// false when it is not (or no longer) one of the account's.
	UseRecoveryCode(ctx context.Context, id int64, hash string) (bool, error)
	// RecoveryCodesLeft counts the unused recovery codes.
	RecoveryCodesLeft(ctx context.Context, id int64) (int, error)
	// SignedIn records a sign-in's time (the failures are counted by
	// address: AccountGuard).
	SignedIn(ctx context.Context, id int64) error
	// SetPassword replaces the password's hash and ends every session of
	// the account (SessionGen grows).
	SetPassword(ctx context.Context, id int64, hash string) error
	// SetPendingTOTP keeps a new TOTP secret until it is confirmed.
	SetPendingTOTP(ctx context.Context, id int64, secret string) error
	// ConfirmTOTP makes the pending secret the account's, with its first
	// code's step used, and replaces the recovery codes: false when no
	// secret was pending (or another replaced it: want is the one the
	// code was checked against).
	ConfirmTOTP(ctx context.Context, id int64, want string, step int64, recovery []string) (bool, error)
	// SetRole and SetSuspended change the account (ErrAccountNotFound).
	SetRole(ctx context.Context, id int64, role adminauth.Role) error
	SetSuspended(ctx context.Context, id int64, suspended bool) error
	// RevokeInvite ends the open invite with hash, by whom (a
	// principal's name): the invite's address, or ErrInviteNotFound.
	RevokeInvite(ctx context.Context, hash, by string) (string, error)
	AccountGuard
}

// createInviteScript stores an invite.
//
//	KEYS[1]  keyAccountEmails
//	KEYS[2]  keyInvites
//	KEYS[3]  the invite's key (prefixInvite + hash)
//	ARGV[1]  email    ARGV[2] role    ARGV[3] by
//	ARGV[4]  expiry (unix ms)         ARGV[5] the hash
//	ARGV[6]  now (unix ms)            ARGV[7] MaxAccounts
//
// Answers 'ok', 'exists' (the address has an account) or 'full'.
var createInviteScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 'exists' end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[6])
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[7]) then return 'full' end
redis.call('HSET', KEYS[3], 'email', ARGV[1], 'role', ARGV[2], 'by', ARGV[3], 'exp', ARGV[4])
redis.call('PEXPIREAT', KEYS[3], ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
return 'ok'
`)

// CreateInvite implements Accounts.
func (r *Redis) CreateInvite(ctx context.Context, inv Invite) error {
	exp := inv.Expires.UnixMilli()
	res, err := createInviteScript.Run(ctx, r.rdb, []string{keyAccountEmails, keyInvites, inviteKey(inv.Hash)},
		inv.Email, string(inv.Role), inv.By, exp, inv.Hash, r.now().UnixMilli(), MaxAccounts).Text()
	switch {
	case err != nil:
		return err
	case res == "exists":
		return ErrAccountExists
	case res == "full":
		return ErrTooManyAccounts
	}
	return nil
}

// InviteByHash implements Accounts: an invite past its expiry is gone,
// whether or not Redis removed it yet.
func (r *Redis) InviteByHash(ctx context.Context, hash string) (Invite, error) {
	v, err := r.rdb.HGetAll(ctx, inviteKey(hash)).Result()
	if err != nil {
		return Invite{}, err
	}
	inv := parseInvite(hash, v)
	switch {
	case inv.Email == "" || !r.now().Before(inv.Expires):
		return Invite{}, ErrInviteNotFound
	case v["revoked"] != "":
		return Invite{}, ErrInviteRevoked
	}
	return inv, nil
}

func parseInvite(hash string, v map[string]string) Invite {
	ms, _ := strconv.ParseInt(v["exp"], 10, 64)
	return Invite{Hash: hash, Email: v["email"], Role: adminauth.Role(v["role"]), By: v["by"], Expires: time.UnixMilli(ms).UTC(), TOTPSecret: v["totp"]}
}

// inviteSecretScript keeps an invite's TOTP secret once.
//
//	KEYS[1]  the invite's key
//	ARGV[1]  the secret
//
// Answers the secret kept, or false when there is no open invite.
var inviteSecretScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'revoked') == 1 then return false end
redis.call('HSETNX', KEYS[1], 'totp', ARGV[1])
return redis.call('HGET', KEYS[1], 'totp')
`)

// InviteSecret implements Accounts.
func (r *Redis) InviteSecret(ctx context.Context, hash, secret string) (string, error) {
	s, err := inviteSecretScript.Run(ctx, r.rdb, []string{inviteKey(hash)}, secret).Text()
	if errors.Is(err, redis.Nil) {
		return "", ErrInviteNotFound
	}
	return s, err
}

// ListInvites implements Accounts.
func (r *Redis) ListInvites(ctx context.Context) ([]Invite, error) {
	hashes, err := r.rdb.ZRangeByScore(ctx, keyInvites, &redis.ZRangeBy{Min: "(" + strconv.FormatInt(r.now().UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, err
	}
	var out []Invite
	for _, h := range hashes {
		v, err := r.rdb.HGetAll(ctx, inviteKey(h)).Result()
		if err != nil {
			return nil, err
		}
		if inv := parseInvite(h, v); inv.Email != "" {
			out = append(out, inv)
		}
	}
	return out, nil
}

// acceptInviteScript makes an account of an invite.
//
//	KEYS[1]  the invite's key
//	KEYS[2]  keyInvites
//	KEYS[3]  keyAccountEmails
//	KEYS[4]  keyAccounts
//	KEYS[5]  the new account's key (prefixAccount + id)
//	KEYS[6]  its recovery codes' key (prefixAccountRC + id)
//	ARGV[1]  the id           ARGV[2] now (unix ms)
//	ARGV[3]  the password's hash
//	ARGV[4]  the TOTP step used by the first code
//	ARGV[5]  the invite's hash (its member in keyInvites)
//	ARGV[6…] the recovery codes' hashes
//
// Answers {'ok', email, role, totp secret}, {'gone'} (no invite, expired,
// or no secret shown yet), {'revoked'} or {'exists'}.
var acceptInviteScript = redis.NewScript(`
local inv = redis.call('HMGET', KEYS[1], 'email', 'role', 'exp', 'totp', 'by', 'revoked')
if not inv[1] or not inv[4] or tonumber(inv[3]) <= tonumber(ARGV[2]) then return {'gone'} end
if inv[6] then return {'revoked'} end
if redis.call('HEXISTS', KEYS[3], inv[1]) == 1 then return {'exists'} end
redis.call('HSET', KEYS[5], 'email', inv[1], 'role', inv[2], 'pw', ARGV[3], 'totp', inv[4], 'step', ARGV[4],
  'created', ARGV[2], 'by', inv[5])
for i = 6, #ARGV do redis.call('SADD', KEYS[6], ARGV[i]) end
redis.call('HSET', KEYS[3], inv[1], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[2], ARGV[1])
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[5])
return {'ok', inv[1], inv[2], inv[4]}
`)

// AcceptInvite implements Accounts. The id is taken first: an invite
// that turns out to be gone wastes one, which nothing misses.
func (r *Redis) AcceptInvite(ctx context.Context, hash, passwordHash string, step int64, recovery []string) (Account, error) {
	n, err := r.rdb.ZCard(ctx, keyAccounts).Result()
	if err != nil {
		return Account{}, err
	}
	if n >= MaxAccounts {
		return Account{}, ErrTooManyAccounts
	}
	id, err := r.rdb.Incr(ctx, keyAccountSeq).Result()
	if err != nil {
		return Account{}, err
	}
	now := r.now().Truncate(time.Millisecond)
	args := append([]any{id, now.UnixMilli(), passwordHash, step, hash}, anySlice(recovery)...)
	res, err := acceptInviteScript.Run(ctx, r.rdb,
		[]string{inviteKey(hash), keyInvites, keyAccountEmails, keyAccounts, accountKey(id), recoveryKey(id)}, args...).StringSlice()
	switch {
	case err != nil:
		return Account{}, err
	case res[0] == "gone":
		return Account{}, ErrInviteNotFound
	case res[0] == "revoked":
		return Account{}, ErrInviteRevoked
	case res[0] == "exists":
		return Account{}, ErrAccountExists
	}
	return Account{ID: id, Email: res[1], Role: adminauth.Role(res[2]), PasswordHash: passwordHash, TOTPSecret: res[3], TOTPStep: step, Created: now}, nil
}

// Account implements Accounts.
func (r *Redis) Account(ctx context.Context, id int64) (Account, error) {
	v, err := r.rdb.HGetAll(ctx, accountKey(id)).Result()
	if err != nil {
		return Account{}, err
	}
	if v["email"] == "" {
		return Account{}, ErrAccountNotFound
	}
	return parseAccount(id, v), nil
}

// AccountByEmail implements Accounts.
func (r *Redis) AccountByEmail(ctx context.Context, email string) (Account, error) {
	s, err := r.rdb.HGet(ctx, keyAccountEmails, email).Result()
	if errors.Is(err, redis.Nil) {
		return Account{}, ErrAccountNotFound
	}
	if err != nil {
		return Account{}, err
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return Account{}, fmt.Errorf("account index %q: %w", s, err)
	}
	return r.Account(ctx, id)
}

func parseAccount(id int64, v map[string]string) Account {
	ms := func(f string) time.Time { return unixMilli(v[f], 10) }
	step, _ := strconv.ParseInt(v["step"], 10, 64)
	gen, _ := strconv.ParseInt(v["gen"], 10, 64)
	return Account{
		ID: id, Email: v["email"], Role: adminauth.Role(v["role"]), PasswordHash: v["pw"],
		TOTPSecret: v["totp"], TOTPStep: step, PendingTOTP: v["pend"],
		Created: ms("created"), LastSignIn: ms("last"), Suspended: v["susp"] == "1",
		SessionGen: gen,
	}
}

// ListAccounts implements Accounts.
func (r *Redis) ListAccounts(ctx context.Context) ([]Account, error) {
	ids, err := r.rdb.ZRange(ctx, keyAccounts, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	out := make([]Account, 0, len(ids))
	for _, s := range ids {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("account id %q: %w", s, err)
		}
		a, err := r.Account(ctx, id)
		if errors.Is(err, ErrAccountNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// useStepScript accepts a TOTP step once.
//
//	KEYS[1]  the account's key
//	ARGV[1]  the step
//
// Answers 1 when the step is later than the last used (and is now the
// last), 0 for a replay, -1 when there is no account.
var useStepScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local last = tonumber(redis.call('HGET', KEYS[1], 'step') or '0')
if tonumber(ARGV[1]) <= last then return 0 end
redis.call('HSET', KEYS[1], 'step', ARGV[1])
return 1
`)

// UseTOTPStep implements Accounts.
func (r *Redis) UseTOTPStep(ctx context.Context, id, step int64) (bool, error) {
	n, err := useStepScript.Run(ctx, r.rdb, []string{accountKey(id)}, step).Int()
	if err != nil {
		return false, err
	}
	if n < 0 {
		return false, ErrAccountNotFound
	}
	return n == 1, nil
}

// UseRecoveryCode implements Accounts: SREM is the single use.
func (r *Redis) UseRecoveryCode(ctx context.Context, id int64, hash string) (bool, error) {
	n, err := r.rdb.SRem(ctx, recoveryKey(id), hash).Result()
	return n == 1, err
}

// RecoveryCodesLeft implements Accounts.
func (r *Redis) RecoveryCodesLeft(ctx context.Context, id int64) (int, error) {
	n, err := r.rdb.SCard(ctx, recoveryKey(id)).Result()
	return int(n), err
}

// setAccountFieldsScript changes fields of an existing account only (a deleted
// or unknown id must not become a half record).
//
//	KEYS[1]  the account's key
//	ARGV     field, value, field, value, …
//
// Answers 1, or 0 when there is no account.
var setAccountFieldsScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
`)

func (r *Redis) setFields(ctx context.Context, id int64, fv ...any) error {
	n, err := setAccountFieldsScript.Run(ctx, r.rdb, []string{accountKey(id)}, fv...).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrAccountNotFound
	}
	return nil
}

// SignedIn implements Accounts.
func (r *Redis) SignedIn(ctx context.Context, id int64) error {
	return r.setFields(ctx, id, "last", r.now().UnixMilli())
}

// setPasswordScript replaces the password and ends the sessions.
//
//	KEYS[1]  the account's key
//	ARGV[1]  the password's hash
//
// Answers 1, or 0 when there is no account.
var setPasswordScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'pw', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'gen', 1)
return 1
`)

// SetPassword implements Accounts.
func (r *Redis) SetPassword(ctx context.Context, id int64, hash string) error {
	n, err := setPasswordScript.Run(ctx, r.rdb, []string{accountKey(id)}, hash).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrAccountNotFound
	}
	return nil
}

// SetPendingTOTP implements Accounts.
func (r *Redis) SetPendingTOTP(ctx context.Context, id int64, secret string) error {
	return r.setFields(ctx, id, "pend", secret)
}

// confirmTOTPScript makes the pending secret the account's, and ends every
// session of the account (gen grows, as a password change does): a new
// second factor is a new way in, and a session from before must not
// outlive it.
//
//	KEYS[1]  the account's key
//	KEYS[2]  its recovery codes' key
//	ARGV[1]  the pending secret the code was checked against
//	ARGV[2]  the step of that code
//	ARGV[3…] the new recovery codes' hashes
//
// Answers 1, or 0 when that secret is not the pending one.
var confirmTOTPScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'pend') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'totp', ARGV[1], 'step', ARGV[2])
redis.call('HDEL', KEYS[1], 'pend')
redis.call('HINCRBY', KEYS[1], 'gen', 1)
redis.call('DEL', KEYS[2])
for i = 3, #ARGV do redis.call('SADD', KEYS[2], ARGV[i]) end
return 1
`)

// ConfirmTOTP implements Accounts.
func (r *Redis) ConfirmTOTP(ctx context.Context, id int64, want string, step int64, recovery []string) (bool, error) {
	args := append([]any{want, step}, anySlice(recovery)...)
	n, err := confirmTOTPScript.Run(ctx, r.rdb, []string{accountKey(id), recoveryKey(id)}, args...).Int()
	return n == 1, err
}

// SetRole implements Accounts.
func (r *Redis) SetRole(ctx context.Context, id int64, role adminauth.Role) error {
	return r.setFields(ctx, id, "role", string(role))
}

// SetSuspended implements Accounts.
func (r *Redis) SetSuspended(ctx context.Context, id int64, suspended bool) error {
	v := "0"
	if suspended {
		v = "1"
	}
	return r.setFields(ctx, id, "susp", v)
}

// SessionAccount is the prefix of a session's token field that names an
// account instead of a token's hash ("acct:" + id + ":" + SessionGen): a
// session checks its account on every request, as a token's checks the
// token, and ends once the account's password changed.
const SessionAccount = "acct:"

// AccountSessionRef is the session's reference to a.
func AccountSessionRef(a Account) string {
	return SessionAccount + strconv.FormatInt(a.ID, 10) + ":" + strconv.FormatInt(a.SessionGen, 10)
}

// AccountOfSessionRef reads AccountSessionRef back: the account's id and
// the SessionGen it was made under.
func AccountOfSessionRef(ref string) (id, gen int64, ok bool) {
	s, ok := strings.CutPrefix(ref, SessionAccount)
	if !ok {
		return 0, 0, false
	}
	ids, gens, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, false
	}
	id, err1 := strconv.ParseInt(ids, 10, 64)
	gen, err2 := strconv.ParseInt(gens, 10, 64)
	return id, gen, err1 == nil && err2 == nil && id > 0
}
