package redisstore

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Kind is how the Redis a URL names is deployed, for [NewClient].
type Kind string

// Kinds of [NewClient]'s URLs. Each URL is read by go-redis's own parser,
// which documents every query parameter (snake_case names of the client's
// options: dial_timeout, pool_size, ...; an unknown one is an error).
const (
	// Single is one server, read by redis.ParseURL:
	//
	//	redis://[user:password@]host[:port][/db][?option=value&...]
	//	rediss://...                  (TLS)
	//	unix://[user:password@]/path/to/redis.sock[?db=N&...]
	//
	// The empty Kind means Single too.
	Single Kind = "single"
	// Cluster is a Redis Cluster (Redis 7 or later), read by
	// redis.ParseClusterURL: the host and each addr parameter are seed
	// nodes, the user and password those of every node.
	//
	//	redis://[user:password@]host:port?addr=host2:port2&addr=host3:port3
	Cluster Kind = "cluster"
	// Sentinel is a master watched by Sentinels, read by
	// redis.ParseFailoverURL: the host and each addr parameter are
	// Sentinels, the user and password in front of the host those of the
	// Sentinels, and master_name (required) names the master; the
	// master's own credentials are the username and password parameters.
	//
	//	redis://[user:password@]host:port[/db]?master_name=NAME&addr=host2:port2[&password=...]
	Sentinel Kind = "sentinel"
)

// DefaultDialTimeout is the longest DialTimeout [NewClient] gives a
// client, and the one it gives when the URL sets none: less than
// [DefaultOpTimeout].
const DefaultDialTimeout = time.Second

// NewClient returns a go-redis client of the Redis rawURL names, deployed
// as kind says: a *redis.Client for Single, a *redis.ClusterClient for
// Cluster, a failover client (redis.NewFailoverClient, itself a
// *redis.Client that follows the master the Sentinels name) for Sentinel.
// The client is configured as the store asks (see "Client settings" in
// the package documentation), whatever the URL says:
//
//   - ContextTimeoutEnabled is true, so that [Options.OpTimeout] interrupts
//     socket I/O;
//   - DialTimeout is at most [DefaultDialTimeout] (one second, less than
//     the default OpTimeout): the URL's dial_timeout if positive and
//     smaller (a longer dial would hold Subscribe and Subscription.Close
//     past OpTimeout, see [Options.OpTimeout]);
//   - DialerRetries is 1, so that a refused dial fails at once, unless the
//     URL's dialer_retries (Cluster and Sentinel only) sets another.
//
// Options that would break the store's consistency are refused: reads
// from replicas (read_only, route_by_latency, route_randomly on a
// Cluster; replica_only, route_by_latency, route_randomly on Sentinel).
// Every other URL option is go-redis's to apply.
//
// NewClient sends nothing: a Redis that is down makes calls fail, not
// NewClient. It returns an error, never panics, for a malformed URL, an
// unknown Kind or option, or a pool size go-redis would panic on; the error
// never contains the URL, which may hold a password. The client is the
// caller's: give it to [New], and close it after the Store.
func NewClient(kind Kind, rawURL string) (redis.UniversalClient, error) {
	c, err := newClient(kind, rawURL)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %s URL: %w", kindName(kind), redactURLError(rawURL, err))
	}
	return c, nil
}

func newClient(kind Kind, rawURL string) (redis.UniversalClient, error) {
	switch kind {
	case Single, "":
		o, err := redis.ParseURL(rawURL)
		if err == nil {
			err = settle(&o.ContextTimeoutEnabled, &o.DialTimeout, &o.DialerRetries,
				o.PoolSize, o.MinIdleConns, o.MaxIdleConns, o.MaxActiveConns, o.PipelinePoolSize)
		}
		if err != nil {
			return nil, err
		}
		return redis.NewClient(o), nil
	case Cluster:
		o, err := redis.ParseClusterURL(rawURL)
		if err == nil && (o.ReadOnly || o.RouteByLatency || o.RouteRandomly) {
			err = errReplicaReads
		}
		if err == nil {
			err = settle(&o.ContextTimeoutEnabled, &o.DialTimeout, &o.DialerRetries,
				o.PoolSize, o.MinIdleConns, o.MaxIdleConns, o.MaxActiveConns, o.PipelinePoolSize)
		}
		if err != nil {
			return nil, err
		}
		return redis.NewClusterClient(o), nil
	case Sentinel:
		o, err := redis.ParseFailoverURL(rawURL)
		switch {
		case err != nil:
		case o.MasterName == "":
			err = errors.New("master_name is required: the name the Sentinels know the master by")
		case o.ReplicaOnly || o.RouteByLatency || o.RouteRandomly:
			err = errReplicaReads // go-redis panics on the last two
		default:
			err = settle(&o.ContextTimeoutEnabled, &o.DialTimeout, &o.DialerRetries,
				o.PoolSize, o.MinIdleConns, o.MaxIdleConns, o.MaxActiveConns, o.PipelinePoolSize)
		}
		if err != nil {
			return nil, err
		}
		return redis.NewFailoverClient(o), nil
	}
	return nil, errors.New(`unknown kind: want "single", "cluster" or "sentinel"`)
}

// settle gives parsed client options the settings the store asks for:
// context deadlines on, a DialTimeout of at most DefaultDialTimeout (the
// URL's if positive and smaller: zero is go-redis's five seconds,
// negative none), one
// dial attempt unless the URL set another. It refuses the pool sizes
// go-redis cannot take: it panics, when it creates a pool (on a cluster,
// at the first call to a node), on a count past 32 bits.
func settle(contextTimeout *bool, dialTimeout *time.Duration, dialerRetries *int, poolSizes ...int) error {
	for _, n := range poolSizes {
		if n > math.MaxInt32 {
			return fmt.Errorf("a pool size of %d is more than go-redis takes (%d)", n, math.MaxInt32)
		}
	}
	*contextTimeout = true
	if *dialTimeout <= 0 || *dialTimeout > DefaultDialTimeout {
		*dialTimeout = DefaultDialTimeout
	}
	if *dialerRetries == 0 {
		*dialerRetries = 1
	}
	return nil
}

// errReplicaReads refuses a client that would read from replicas, which
// lag behind their master.
var errReplicaReads = errors.New("reads from replicas are refused: the store reads what it just wrote, on the master")

// kindName names kind in an error, without repeating a string that is not
// one of the kinds.
func kindName(kind Kind) string {
	switch kind {
	case Single, Cluster, Sentinel:
		return string(kind)
	case "":
		return string(Single)
	}
	return "redis"
}

// redactURLError returns err without what rawURL may hold as credentials.
// url.Parse's errors quote the URL whole, so only their reason is kept;
// and a password with an unencoded '/', '?' or '#' makes the parsers read
// part of it as the port, the path or the query, which their errors then
// quote: an error naming any part of what precedes the URL's last '@' is
// replaced by a hint.
func redactURLError(rawURL string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = fmt.Errorf("malformed URL: %w", ue.Err)
	}
	userinfo, _, ok := cutLast(rawURL, "@")
	if !ok {
		return err
	}
	if _, after, found := strings.Cut(userinfo, "://"); found {
		userinfo = after
	}
	msg := err.Error()
	for _, part := range strings.FieldsFunc(userinfo, func(r rune) bool { return strings.ContainsRune(":/?#[]", r) }) {
		if len(part) > 1 && strings.Contains(msg, part) {
			return errors.New("malformed URL (percent-encode any '/', '?', '#', '@' or ':' in the user name and password)")
		}
	}
	return err
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}
