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
	// stored; the same token again is the same device, renewed. Not
	// active: ErrNotActive; no such id: ErrNotFound; nothing is stored.
	AddDevice(ctx context.Context, id int64, d Device) (Device, error)
	// DevicesOf lists the devices of many subscribers, oldest first, in
	// one round trip, lined up with ids.
	DevicesOf(ctx context.Context, ids []int64) ([][]Device, error)
	// DeleteDevice forgets one device (its platform said the token is
	// gone, or the backend removed it): ErrNoDevice when there was none.
	DeleteDevice(ctx context.Context, id int64, deviceID string) error
}

func deviceKey(id int64) string { return idShard(id).key(sfxDevices + strconv.FormatInt(id, 10)) }

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
		return d, nil
	case "notactive":
		return Device{}, ErrNotActive
	case "notfound":
		return Device{}, ErrNotFound
	}
	return Device{}, fmt.Errorf("store a device of %d: answer %q", id, res)
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
	out := make([][]Device, len(ids))
	for i, c := range cmds {
		type entry struct {
			d   Device
			seq int64
		}
		var es []entry
		for devID, v := range c.Val() {
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

// DeleteDevice implements Devices.
func (r *Redis) DeleteDevice(ctx context.Context, id int64, deviceID string) error {
	n, err := r.rdb.HDel(ctx, deviceKey(id), deviceID).Result()
	if err != nil {
		return wrapErr("delete a device", err)
	}
	if n == 0 {
		return ErrNoDevice
	}
	return nil
}
