package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Phone is a person's mobile number for SMS, with the consent it was
// given under, and the number's own state.
type Phone struct {
	// Number is E.164 (+447400123456): the caller parsed it (phone.Parse).
	Number string `json:"number"`
	// Source is where the consent came from: "preferences" (the person
	// entered the code sent to it) or what the product backend recorded
	// (the API's consent_source).
	Source    string    `json:"consent_source"`
	ConsentAt time.Time `json:"consent_at"`
	// State is the number's: NumberOn, or NumberStopped (it texted STOP),
	// or NumberRetired (the gateway said it cannot take SMS).
	State string `json:"state"`
}

// The states of a number. They are the number's, not the person's: a STOP
// from a phone stops it for whoever gave that number, until a START from
// the same phone.
const (
	NumberOn      = "on"
	NumberStopped = "stopped"
	NumberRetired = "retired"
)

// ErrNoPhone: the person has no number.
var ErrNoPhone = errors.New("no phone number")

// Phones are the people's numbers and the numbers' states.
type Phones interface {
	// SetPhone gives the active subscriber id the number (replacing one
	// they had) under consent from source. The number's state is left as
	// it is: a number that texted STOP stays stopped until it texts
	// START. Not active: ErrNotActive; no such id: ErrNotFound.
	SetPhone(ctx context.Context, id int64, number, source string) (Phone, error)
	// DeletePhone takes id's number away (ErrNoPhone when there was none).
	DeletePhone(ctx context.Context, id int64) error
	// PhonesOf reads the numbers of many people with their states, lined
	// up with ids (a zero Phone: none), in two round trips.
	PhonesOf(ctx context.Context, ids []int64) ([]Phone, error)
	// SetNumberState records what the number said or the gateway said of
	// it (NumberStopped on STOP, NumberOn on START, NumberRetired for a
	// number that cannot take SMS).
	SetNumberState(ctx context.Context, number, state string) error
	// NumberState is a number's state (NumberOn unless it said STOP or
	// was retired).
	NumberState(ctx context.Context, number string) (string, error)
	// StartPhoneCode, PhoneCodeSent, CheckPhoneCode and PendingPhoneCode
	// are a number's proof by a texted code (the preference centre).
	StartPhoneCode(ctx context.Context, id int64, number, code string) error
	PhoneCodeSent(ctx context.Context, id int64, number, code, messageSID string) error
	CheckPhoneCode(ctx context.Context, id int64, code string) (number, messageSID string, err error)
	PendingPhoneCode(ctx context.Context, id int64) (string, error)
	// SMSCallbackSeen tells whether a gateway callback's key (its
	// message SID and the state it set) was acted on within its window;
	// RememberSMSCallback records it, for ttl, once it was.
	SMSCallbackSeen(ctx context.Context, key string) (bool, error)
	RememberSMSCallback(ctx context.Context, key string, ttl time.Duration) error
}

// setPhoneScript gives an active subscriber a number.
//
//	KEYS[1]  the id's shard's anchor
//	KEYS[2]  the subscriber's number (phoneKey)
//	ARGV[1]  subscriber id
//	ARGV[2]  the number (E.164)
//	ARGV[3]  consent source
//	ARGV[4]  now (unix ms, base 36)
//
// Answers 'ok', 'notactive' or 'notfound'.
var setPhoneScript = subscriberScript(`
local id = ARGV[1]
if redis.call('GETBIT', ACTIVE, slot(id)) == 0 then
  if redis.call('HEXISTS', subkey(id), id) == 0 then return 'notfound' end
  return 'notactive'
end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'number', ARGV[2], 'source', ARGV[3], 'at', ARGV[4])
return 'ok'
`)

// SetPhone implements Phones.
func (r *Redis) SetPhone(ctx context.Context, id int64, number, source string) (Phone, error) {
	if number == "" || number[0] != '+' || source == "" {
		return Phone{}, fmt.Errorf("phone of %d: an E.164 number and a consent source are needed", id)
	}
	now := r.now().UTC().Truncate(time.Millisecond)
	res, err := setPhoneScript.Run(ctx, r.rdb, []string{anchor(idShard(id)), phoneKey(id)}, id, number, source, at36(now)).Text()
	if err != nil {
		return Phone{}, fmt.Errorf("store the phone of %d: %w", id, err)
	}
	switch res {
	case "notactive":
		return Phone{}, ErrNotActive
	case "notfound":
		return Phone{}, ErrNotFound
	case "ok":
	default:
		return Phone{}, fmt.Errorf("store the phone of %d: answer %q", id, res)
	}
	all, err := r.PhonesOf(ctx, []int64{id})
	if err != nil {
		return Phone{}, err
	}
	return all[0], nil
}

// DeletePhone implements Phones.
func (r *Redis) DeletePhone(ctx context.Context, id int64) error {
	n, err := r.rdb.Del(ctx, phoneKey(id)).Result()
	if err != nil {
		return wrapErr("delete a phone", err)
	}
	if n == 0 {
		return ErrNoPhone
	}
	return nil
}

// PhonesOf implements Phones.
func (r *Redis) PhonesOf(ctx context.Context, ids []int64) ([]Phone, error) {
	recs := make([]*redis.MapStringStringCmd, len(ids))
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			recs[i] = p.HGetAll(ctx, phoneKey(id))
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the phones of %d subscribers: %w", len(ids), err)
	}
	out := make([]Phone, len(ids))
	states := make([]*redis.StringCmd, len(ids))
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range recs {
			f := c.Val()
			if f["number"] == "" {
				continue
			}
			out[i] = Phone{Number: f["number"], Source: f["source"], ConsentAt: time36(f["at"]), State: NumberOn}
			states[i] = p.Get(ctx, numberKey(f["number"]))
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read the numbers' states: %w", err)
	}
	for i, c := range states {
		if c == nil {
			continue
		}
		// A number that is on has no key (redis.Nil); any other error
		// is one, whichever command of the pipeline met it first.
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("read the state of a number: %w", err)
		}
		if v := c.Val(); v != "" {
			out[i].State = v
		}
	}
	return out, nil
}

// SetNumberState implements Phones. A number that is on keeps no key:
// only a stop or a retirement is stored.
func (r *Redis) SetNumberState(ctx context.Context, number, state string) error {
	var err error
	switch state {
	case NumberOn:
		err = r.rdb.Del(ctx, numberKey(number)).Err()
	case NumberStopped, NumberRetired:
		err = r.rdb.Set(ctx, numberKey(number), state, 0).Err()
	default:
		return fmt.Errorf("number %s: no state %q", number, state)
	}
	return wrapErr("set a number's state", err)
}

// takeAllowanceScript counts one text against a cap for the day.
//
//	KEYS[1]  the day's counter
//	ARGV[1]  the cap
//
// Answers 1 when counted, 0 when the cap was reached (nothing counted).
var takeAllowanceScript = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], 172800) end
if n > tonumber(ARGV[1]) then
  redis.call('DECR', KEYS[1])
  return 0
end
return 1
`)

// The daily caps TakeSMSAllowance answers when one is reached (the
// values of the metric's cap label).
const (
	SMSCapPerNumberDay = "per_number_day" // NEWSLETTER_SMS_PER_NUMBER_DAY
	SMSCapPerDay       = "per_day"        // NEWSLETTER_SMS_PER_DAY
)

// TakeSMSAllowance counts one text to number on day (YYYY-MM-DD, UTC)
// against the number's cap and the service's: "" when counted, or the
// cap reached (SMSCapPerNumberDay, SMSCapPerDay) with nothing counted.
// GiveSMSAllowance takes it back (a text that was not sent).
func (r *Redis) TakeSMSAllowance(ctx context.Context, number, day string, perNumber, perDay int) (string, error) {
	ok, err := takeAllowanceScript.Run(ctx, r.rdb, []string{numberDayKey(number, day)}, perNumber).Int()
	if err != nil {
		return "", wrapErr("take an SMS allowance", err)
	}
	if ok == 0 {
		return SMSCapPerNumberDay, nil
	}
	ok, err = takeAllowanceScript.Run(ctx, r.rdb, []string{smsDayKey(day)}, perDay).Int()
	if err != nil || ok == 0 {
		// The number's count goes back: the text waits for another day.
		if derr := r.rdb.Decr(ctx, numberDayKey(number, day)).Err(); derr != nil {
			err = errors.Join(err, derr)
		}
		if err != nil {
			return "", wrapErr("take an SMS allowance", err)
		}
		return SMSCapPerDay, nil
	}
	return "", nil
}

// GiveSMSAllowance takes back what TakeSMSAllowance counted.
func (r *Redis) GiveSMSAllowance(ctx context.Context, number, day string) error {
	_, err1 := r.rdb.Decr(ctx, numberDayKey(number, day)).Result()
	_, err2 := r.rdb.Decr(ctx, smsDayKey(day)).Result()
	return wrapErr("give back an SMS allowance", errors.Join(err1, err2))
}

// A number the person gives in the preference centre is theirs once they
// enter the code texted to it: the code waits with the number, in the
// person's shard, for PhoneCodeTTL and PhoneCodeTries attempts.
const (
	PhoneCodeTTL   = 10 * time.Minute
	PhoneCodeTries = 5
	// PhoneCodeEvery is how often a person may ask for a new code.
	PhoneCodeEvery = time.Minute
)

// The answers of a code's check.
var (
	ErrCodeTooSoon = errors.New("a code was sent less than a minute ago")
	ErrNoCode      = errors.New("no code is waiting: ask for a new one")
	ErrWrongCode   = errors.New("that is not the code we sent")
	// ErrCodeNotSent: a code is waiting but the gateway has not taken
	// its text yet; the entered code is not checked (nor a try counted),
	// so guessing before the text is out learns nothing.
	ErrCodeNotSent = errors.New("the code's text has not gone out yet")
)

// startCodeScript keeps a new code for a number.
//
//	KEYS[1]  the person's waiting code (phoneCodeKey)
//	ARGV[1]  number   ARGV[2] the code's hash   ARGV[3] now (unix ms)
//	ARGV[4]  the least time between codes (ms)   ARGV[5] ttl (ms)
//
// Answers 'ok' or 'soon' (nothing written).
var startCodeScript = redis.NewScript(`
local at = tonumber(redis.call('HGET', KEYS[1], 'at') or '0')
if tonumber(ARGV[3]) - at < tonumber(ARGV[4]) then return 'soon' end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'number', ARGV[1], 'code', ARGV[2], 'at', ARGV[3], 'tries', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 'ok'
`)

// codeSentScript records that the gateway took the text of the waiting
// code: only the code it carried, to its number, so a late answer for a
// code replaced since changes nothing.
//
//	KEYS[1]  the person's waiting code
//	ARGV[1]  number   ARGV[2] the code's hash   ARGV[3] the message's SID
//
// Answers 1, or 0 when that code is no longer waiting.
var codeSentScript = redis.NewScript(`
local c = redis.call('HMGET', KEYS[1], 'number', 'code')
if c[1] ~= ARGV[1] or c[2] ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'sid', ARGV[3])
return 1
`)

// checkCodeScript checks an entered code.
//
//	KEYS[1]  the person's waiting code
//	ARGV[1]  the entered code's hash   ARGV[2] the most tries
//
// Answers {'ok', number, sid} (the code is gone), {'wrong'}, {'unsent'}
// (its text not taken by the gateway yet: nothing checked, no try
// counted), or {'none'} (no code, or the last try spent: the code is
// gone).
var checkCodeScript = redis.NewScript(`
local c = redis.call('HMGET', KEYS[1], 'number', 'code', 'sid')
if not c[1] then return {'none'} end
if not c[3] then return {'unsent'} end
if c[2] == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return {'ok', c[1], c[3]}
end
if redis.call('HINCRBY', KEYS[1], 'tries', 1) >= tonumber(ARGV[2]) then
  redis.call('DEL', KEYS[1])
  return {'none'}
end
return {'wrong'}
`)

// codeHash keeps a code out of Redis as typed: a six-digit code is
// guessed by tries, not read, and the tries are counted.
func codeHash(id int64, code string) string {
	sum := sha256.Sum256([]byte(strconv.FormatInt(id, 10) + ":" + code))
	return fmt.Sprintf("%x", sum[:16])
}

// StartPhoneCode keeps code for number as subscriber id's waiting code,
// replacing one before: ErrCodeTooSoon within PhoneCodeEvery of the last.
func (r *Redis) StartPhoneCode(ctx context.Context, id int64, number, code string) error {
	res, err := startCodeScript.Run(ctx, r.rdb, []string{phoneCodeKey(id)}, number, codeHash(id, code),
		r.now().UnixMilli(), PhoneCodeEvery.Milliseconds(), PhoneCodeTTL.Milliseconds()).Text()
	if err != nil {
		return fmt.Errorf("keep a phone code for %d: %w", id, err)
	}
	if res == "soon" {
		return ErrCodeTooSoon
	}
	return nil
}

// PhoneCodeSent records that the gateway took the text of id's waiting
// code for number (its message SID): only then can the code be entered.
// ErrNoCode when that code is no longer waiting (replaced or expired).
func (r *Redis) PhoneCodeSent(ctx context.Context, id int64, number, code, messageSID string) error {
	n, err := codeSentScript.Run(ctx, r.rdb, []string{phoneCodeKey(id)}, number, codeHash(id, code), messageSID).Int()
	if err != nil {
		return fmt.Errorf("record a phone code's text for %d: %w", id, err)
	}
	if n == 0 {
		return ErrNoCode
	}
	return nil
}

// CheckPhoneCode checks code against id's waiting one: the number it was
// sent to and the SID of the message that carried it when it matches
// (the code is then spent), ErrWrongCode, ErrCodeNotSent (its text is
// not out: nothing checked), or ErrNoCode (none, expired, or its tries
// spent).
func (r *Redis) CheckPhoneCode(ctx context.Context, id int64, code string) (number, messageSID string, err error) {
	res, err := checkCodeScript.Run(ctx, r.rdb, []string{phoneCodeKey(id)}, codeHash(id, code), PhoneCodeTries).StringSlice()
	if err != nil {
		return "", "", fmt.Errorf("check a phone code for %d: %w", id, err)
	}
	switch {
	case len(res) == 3 && res[0] == "ok":
		return res[1], res[2], nil
	case len(res) == 1 && res[0] == "wrong":
		return "", "", ErrWrongCode
	case len(res) == 1 && res[0] == "unsent":
		return "", "", ErrCodeNotSent
	}
	return "", "", ErrNoCode
}

// SMSCallbackSeen implements Phones.
func (r *Redis) SMSCallbackSeen(ctx context.Context, key string) (bool, error) {
	n, err := r.rdb.Exists(ctx, smsCallbackKey(key)).Result()
	return n > 0, wrapErr("read an SMS callback", err)
}

// RememberSMSCallback implements Phones.
func (r *Redis) RememberSMSCallback(ctx context.Context, key string, ttl time.Duration) error {
	return wrapErr("remember an SMS callback", r.rdb.Set(ctx, smsCallbackKey(key), "1", ttl).Err())
}

// PendingPhoneCode is the number id's waiting code was sent to ("": none).
func (r *Redis) PendingPhoneCode(ctx context.Context, id int64) (string, error) {
	n, err := r.rdb.HGet(ctx, phoneCodeKey(id), "number").Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return n, wrapErr("read a waiting phone code", err)
}

// NumberState is a number's state (NumberOn unless it said STOP or was
// retired).
func (r *Redis) NumberState(ctx context.Context, number string) (string, error) {
	v, err := r.rdb.Get(ctx, numberKey(number)).Result()
	if errors.Is(err, redis.Nil) {
		return NumberOn, nil
	}
	return v, wrapErr("read a number's state", err)
}
