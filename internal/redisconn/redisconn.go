// Package redisconn turns the configured Redis (one Redis or Sentinel from
// NEWSLETTER_REDIS_URL, or a Redis Cluster from
// NEWSLETTER_REDIS_CLUSTER_ADDRS) into what the service connects with: the
// go-redis client every role shares (Client), and the asynq.RedisConnOpt
// that asynq and asynqmon make their own clients from (a Cluster for a
// cluster, asynq's parsed URL otherwise).
//
// Both come from here so that every connection to a cluster gets the same
// settings, above all a short ClusterStateReloadInterval (StateReload):
// asynq.RedisClusterClientOpt cannot set it, and go-redis's default of a
// minute kept a client sending a dead primary's slots to its address for
// that long after its replica had taken over.
package redisconn

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// StateReload is how often a cluster client reloads the cluster's layout
// (which primary serves which slot) besides when a node answers MOVED. A
// primary that dies answers nothing, so no MOVED tells the client: with
// go-redis's default of a minute, a client kept sending that primary's
// slots to its dead address for up to a minute after the replica had taken
// over (go-redis v9.23; the failover itself took some 4 s). A reload is one
// CLUSTER SLOTS to one node, cheap at once a second.
const StateReload = time.Second

// Cluster is a Redis Cluster connection, and the asynq.RedisConnOpt for
// it: asynq (client, server, scheduler, inspector) and asynqmon call
// MakeRedisClient, which gives them the same cluster client the service
// uses (a *redis.ClusterClient, which asynqmon's Redis info page asks for
// by type), rather than asynq.RedisClusterClientOpt's, whose layout
// reload cannot be shortened.
type Cluster struct {
	// Addrs are the seed nodes, host:port: the client asks them for the
	// layout and learns every other node from it.
	Addrs    []string
	Username string
	Password string
	// TLSConfig, when set, is used to every node (seeds written
	// rediss://).
	TLSConfig *tls.Config
}

// MakeRedisClient implements asynq.RedisConnOpt: a *redis.ClusterClient
// with go-redis's default pool (per node), for the clients asynq and
// asynqmon make for themselves.
func (c Cluster) MakeRedisClient() any {
	return redis.NewClusterClient(c.options(0))
}

// String shows the seeds as configured, without credentials: for logs and
// errors.
func (c Cluster) String() string {
	scheme := ""
	if c.TLSConfig != nil {
		scheme = "rediss://"
	}
	seeds := make([]string, len(c.Addrs))
	for i, a := range c.Addrs {
		seeds[i] = scheme + a
	}
	return strings.Join(seeds, ",")
}

// options are the cluster client's; pool 0 is go-redis's default.
func (c Cluster) options(pool int) *redis.ClusterOptions {
	var tc *tls.Config
	if c.TLSConfig != nil {
		tc = c.TLSConfig.Clone() // the client may keep state in it (session cache)
	}
	return &redis.ClusterOptions{
		Addrs: c.Addrs, Username: c.Username, Password: c.Password, TLSConfig: tc,
		ClusterStateReloadInterval: StateReload,
		PoolSize:                   pool, Protocol: 2, ContextTimeoutEnabled: true,
	}
}

// Client connects like asynq would, but speaks RESP2: RESP3 makes go-redis
// look for push notifications around every command, which cost a tenth of
// the API's CPU in the subscribe benchmark, and nothing here uses them. The
// pool is sized for the API's parallel requests plus the worker's
// concurrency (on a cluster, per node). Context deadlines bound its socket
// waits (ContextTimeoutEnabled; go-redis ignores them otherwise), so a
// request's timeout or a probe's budget holds when Redis hangs. Its
// commands sent under WaitOut wait out an unreachable Redis (Hold); the
// others fail at once, as they would without the hook.
func Client(opt asynq.RedisConnOpt, concurrency int) (redis.UniversalClient, error) {
	c, err := newClient(opt, concurrency)
	if err != nil {
		return nil, err
	}
	Hold(c)
	return c, nil
}

// newClient is Client without the hold.
func newClient(opt asynq.RedisConnOpt, concurrency int) (redis.UniversalClient, error) {
	pool := 10*runtime.GOMAXPROCS(0) + concurrency
	switch o := opt.(type) {
	case asynq.RedisClientOpt:
		return redis.NewClient(&redis.Options{
			Network: o.Network, Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB,
			DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
			TLSConfig: o.TLSConfig, PoolSize: pool, Protocol: 2, ContextTimeoutEnabled: true,
		}), nil
	case asynq.RedisFailoverClientOpt:
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: o.MasterName, SentinelAddrs: o.SentinelAddrs, SentinelUsername: o.SentinelUsername,
			SentinelPassword: o.SentinelPassword, Username: o.Username, Password: o.Password, DB: o.DB,
			DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
			TLSConfig: o.TLSConfig, PoolSize: pool, Protocol: 2, ContextTimeoutEnabled: true,
		}), nil
	case Cluster:
		return redis.NewClusterClient(o.options(pool)), nil
	}
	return nil, fmt.Errorf("unsupported connection type %T", opt)
}

// ParseCluster reads NEWSLETTER_REDIS_CLUSTER_ADDRS, comma-separated seed
// nodes each written host:port, redis://host:port or rediss://host:port
// (TLS), the last two with an optional user:password@. password is
// NEWSLETTER_REDIS_PASSWORD, for a cluster whose seeds carry none.
//
// TLS is all or nothing: a cluster's nodes speak one or the other, and a
// client has one TLS setting for every node, so seeds that mix them are
// refused rather than one of them silently ignored. The same holds for
// credentials: seeds that name different ones, or a password in a seed
// other than NEWSLETTER_REDIS_PASSWORD, are refused.
//
// With TLS, the certificate is checked against the first seed's host name,
// as go-redis does for a cluster URL: the nodes are reached at the
// addresses the cluster announces (often bare IPs), which a cluster's
// certificate names seldom cover. Seeds given as IPs set no name, and each
// node is checked against its own address.
func ParseCluster(seeds, password string) (Cluster, error) {
	var (
		c                Cluster
		user, pass       string
		credsFrom        string // the first seed with credentials
		tlsSeeds, plains int
	)
	for i, raw := range strings.Split(seeds, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			return Cluster{}, fmt.Errorf("seed %d is empty (a stray comma?)", i+1)
		}
		s, err := parseSeed(raw)
		if err != nil {
			return Cluster{}, err
		}
		if s.tls {
			tlsSeeds++
		} else {
			plains++
		}
		if s.hasCreds {
			if credsFrom != "" && (s.user != user || s.pass != pass) {
				return Cluster{}, fmt.Errorf("%s and %s name different credentials: a cluster has one set", redact(credsFrom), redact(raw))
			}
			if credsFrom == "" {
				credsFrom, user, pass = raw, s.user, s.pass
			}
		}
		c.Addrs = append(c.Addrs, s.addr)
	}
	if tlsSeeds > 0 && plains > 0 {
		return Cluster{}, fmt.Errorf("%d seeds are rediss:// (TLS) and %d plain: a cluster's nodes speak one or the other", tlsSeeds, plains)
	}
	if password != "" && pass != "" && pass != password {
		return Cluster{}, fmt.Errorf("%s has a password other than NEWSLETTER_REDIS_PASSWORD: give it once", redact(credsFrom))
	}
	c.Username, c.Password = user, pass
	if c.Password == "" {
		c.Password = password
	}
	if tlsSeeds > 0 {
		c.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		if host, _, _ := net.SplitHostPort(c.Addrs[0]); net.ParseIP(host) == nil {
			c.TLSConfig.ServerName = host
		}
	}
	return c, nil
}

type seed struct {
	addr       string
	tls        bool
	hasCreds   bool
	user, pass string
}

// parseSeed reads one seed. A URL may name no database but 0 (a cluster
// has no other) and takes no options: what would they mean for one seed
// of many?
func parseSeed(raw string) (seed, error) {
	if !strings.Contains(raw, "://") {
		if err := checkHostPort(raw); err != nil {
			return seed{}, fmt.Errorf("%q: %w", raw, err)
		}
		return seed{addr: raw}, nil
	}
	shown := redact(raw)
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error quotes the URL, password and all.
		return seed{}, fmt.Errorf("%q: not a URL", shown)
	}
	var s seed
	switch u.Scheme {
	case "redis":
	case "rediss":
		s.tls = true
	default:
		return seed{}, fmt.Errorf("%q: want host:port, redis://host:port or rediss://host:port", shown)
	}
	if u.Path != "" && u.Path != "/" && u.Path != "/0" {
		return seed{}, fmt.Errorf("%q: a cluster has database 0 only", shown)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return seed{}, fmt.Errorf("%q: a seed takes no options", shown)
	}
	if err := checkHostPort(u.Host); err != nil {
		return seed{}, fmt.Errorf("%q: %w", shown, err)
	}
	s.addr = u.Host
	if u.User != nil {
		s.hasCreds = true
		s.user = u.User.Username()
		s.pass, _ = u.User.Password() // none: the user alone
	}
	return s, nil
}

// checkHostPort wants host:port with a host and a port number: a seed
// without a port would be dialled on 6379 by nobody's choice.
func checkHostPort(hp string) error {
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return errors.New("want host:port")
	}
	if host == "" {
		return errors.New("no host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	return nil
}

// redact hides the credentials of a seed URL.
func redact(raw string) string {
	scheme := strings.Index(raw, "://")
	at := strings.LastIndex(raw, "@")
	if scheme < 0 || at < scheme {
		return raw
	}
	return raw[:scheme+3] + "***" + raw[at:]
}
