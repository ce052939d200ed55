package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Device is one app install a product backend registered for a person:
// the mobile push channel's address (FCM or APNs).
type Device struct {
	// ID names the device to the API (DELETE …/devices/{id}) and in the
	// push lane's tasks: the start of the SHA-256 of its platform and
	// token, so registering the same token again is the same device.
	ID       string `json:"id"`
	Platform string `json:"platform"`
	Token    string `json:"token"`
	// CreatedAt is when it was (last) registered.
	CreatedAt time.Time `json:"created_at"`
}

// The mobile push platforms.
const (
	PlatformFCM  = "fcm"
	PlatformAPNs = "apns"
)

// MaxDevices is how many app installs one subscriber can have notified;
// one more replaces the one registered longest ago (phones are replaced
// more often than apps are uninstalled).
const MaxDevices = 10

// ErrNoDevice: no such device of the subscriber.
var ErrNoDevice = errors.New("no such device")

// DeviceID is the id of platform's token (Device.ID).
func DeviceID(platform, token string) string {
	sum := sha256.Sum256([]byte(platform + "\x00" + token))
	return hex.EncodeToString(sum[:8])
}

// Devices are the subscribers' app installs. Like browsers (push.go) they
// end when the person leaves or is erased, and only active subscribers
// are notified.
type Devices interface {
	// AddDevice stores d (its platform and token; the caller checked
	// their shape) for the active subscriber id and answers it as
	// stored; the same token again is the same device, renewed. A token
	// another person registered before moves to id: it is theirs no
	// more (a phone sold, an app signed into another account). Not
	// active: ErrNotActive; no such id: ErrNotFound; nothing is stored.
	AddDevice(ctx context.Context, id int64, d Device) (Device, error)
	// DevicesOf lists the devices of many subscribers, oldest first, in
	// one round trip, lined up with ids.
	DevicesOf(ctx context.Context, ids []int64) ([][]Device, error)
	// DeleteDevice forgets one device (its platform said the token is
	// gone, or the backend removed it): ErrNoDevice when there was none.
	DeleteDevice(ctx context.Context, id int64, deviceID string) error
}

// disownScript forgets a device's owner if it is still the subscriber
// who deleted the device (another may have registered it since).
//
//	KEYS[1]  the device's owner (deviceOwnerKey)
//	ARGV[1]  the subscriber id who deleted it
//
// Answers 1 when the owner was forgotten, 0 when it is another.
var disownScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// A device's stored value: "seq created-ms platform token", the sequence
// ordering a subscriber's devices (the eviction takes the lowest).
func encodeDevice(d Device) string { return ms(d.CreatedAt) + " " + d.Platform + " " + d.Token }

func decodeDevice(id, v string) (Device, int64, error) {
	f := strings.SplitN(v, " ", 4)
	if len(f) != 4 {
		return Device{}, 0, fmt.Errorf("device %q: unreadable value", id)
	}
	seq, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return Device{}, 0, fmt.Errorf("device %q: unreadable value", id)
	}
	return Device{ID: id, Platform: f[2], Token: f[3], CreatedAt: msTime(f[1])}, seq, nil
}

// AddDevice implements Devices.
func (r *Redis) AddDevice(ctx context.Context, id int64, d Device) (Device, error) {
	if d.Platform == "" || d.Token == "" || strings.ContainsAny(d.Platform, " ") {
		return Device{}, fmt.Errorf("device of %d: platform and token are needed", id)
	}
	d.ID, d.CreatedAt = DeviceID(d.Platform, d.Token), r.now().UTC().Truncate(time.Millisecond)
	// The same steps as a browser's, on the devices' hash (addPushScript).
	res, err := addPushScript.Run(ctx, r.rdb, []string{anchor(idShard(id)), deviceKey(id)}, id, d.ID, encodeDevice(d), MaxDevices).Text()
	if err != nil {
		return Device{}, fmt.Errorf("store a device of %d: %w", id, err)
	}
	switch res {
	case "ok":
		return d, r.takeDevice(ctx, id, d.ID)
	case "notactive":
		return Device{}, ErrNotActive
	case "notfound":
		return Device{}, ErrNotFound
	}
	return Device{}, fmt.Errorf("store a device of %d: answer %q", id, res)
}

// takeDevice makes id the device's owner and deletes it from the person
// who had it before. Run after the device is stored for id: a failure
// between the two leaves it listed for its old owner only, and the
// caller's retry of the registration finishes the move.
func (r *Redis) takeDevice(ctx context.Context, id int64, deviceID string) error {
	me := strconv.FormatInt(id, 10)
	prev, err := r.rdb.SetArgs(ctx, deviceOwnerKey(deviceID), me, redis.SetArgs{Get: true}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return wrapErr("take a device from its old owner", err)
	}
	if prev == "" || prev == me {
		return nil
	}
	old, err := strconv.ParseInt(prev, 10, 64)
	if err != nil {
		return fmt.Errorf("device %s: unreadable owner %q", deviceID, prev)
	}
	return wrapErr("delete a device from its old owner", r.rdb.HDel(ctx, deviceKey(old), deviceID).Err())
}

// DevicesOf implements Devices.
func (r *Redis) DevicesOf(ctx context.Context, ids []int64) ([][]Device, error) {
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, deviceKey(id))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the devices of %d subscribers: %w", len(ids), err)
	}
	owners, err := r.deviceOwners(ctx, cmds)
	if err != nil {
		return nil, err
	}
	out := make([][]Device, len(ids))
	for i, c := range cmds {
		type entry struct {
			d   Device
			seq int64
		}
		var es []entry
		for devID, v := range c.Val() {
			if owner := owners[devID]; owner != "" && owner != strconv.FormatInt(ids[i], 10) {
				continue // moved to another person
			}
			d, seq, err := decodeDevice(devID, v)
			if err != nil {
				return nil, fmt.Errorf("subscriber %d: %w", ids[i], err)
			}
			es = append(es, entry{d, seq})
		}
		slices.SortFunc(es, func(a, b entry) int { return int(a.seq - b.seq) })
		for _, e := range es {
			out[i] = append(out[i], e.d)
		}
	}
	return out, nil
}

// deviceOwners reads the owners of the devices in hashes (device id ->
// subscriber id; none for a device stored before owners were kept).
func (r *Redis) deviceOwners(ctx context.Context, hashes []*redis.MapStringStringCmd) (map[string]string, error) {
	owners := map[string]*redis.StringCmd{}
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range hashes {
			for devID := range c.Val() {
				owners[devID] = p.Get(ctx, deviceOwnerKey(devID))
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read the owners of devices: %w", err)
	}
	out := make(map[string]string, len(owners))
	for devID, c := range owners {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("read the owner of a device: %w", err)
		}
		out[devID] = c.Val()
	}
	return out, nil
}

// DeleteDevice implements Devices.
func (r *Redis) DeleteDevice(ctx context.Context, id int64, deviceID string) error {
	n, err := r.rdb.HDel(ctx, deviceKey(id), deviceID).Result()
	if err != nil {
		return wrapErr("delete a device", err)
	}
	if n == 0 {
		return ErrNoDevice
	}
	if err := disownScript.Run(ctx, r.rdb, []string{deviceOwnerKey(deviceID)}, id).Err(); err != nil {
		return wrapErr("forget a device's owner", err)
	}
	return nil
}
