// Package redisflag is how the commands of this module are told which
// Redis to use: a single server (-redis URL), a Redis Cluster
// (-redis-cluster ADDR[,ADDR...], seed nodes) or a master watched by
// Sentinels (-redis-sentinel NAME@ADDR[,ADDR...], the master's name and
// the Sentinels' addresses), with the environment variables REDIS_URL,
// REDIS_CLUSTER and REDIS_SENTINEL as fallbacks. It builds the go-redis
// client with the settings package redisstore asks for (see "Client
// settings" there).
//
// examples/quickstart, a module of its own, keeps a copy in its own
// internal tree (a module may not rely on another's internal packages):
// the two take the same flags; change them together.
package redisflag

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/session/redisstore"
)

// Kinds of Redis deployment.
const (
	None     = ""         // no Redis: keep everything in memory
	Single   = "single"   // one server (-redis URL)
	Cluster  = "cluster"  // a Redis Cluster (-redis-cluster)
	Sentinel = "sentinel" // a master watched by Sentinels (-redis-sentinel)
)

// Flags holds the three flags of a command's flag set.
type Flags struct {
	fs                      *flag.FlagSet
	url, cluster, sentinel  string
	envURL, envCl, envSntnl string
}

// names of the flags and of their environment variables, in order.
var (
	flagNames = [3]string{"redis", "redis-cluster", "redis-sentinel"}
	envNames  = [3]string{"REDIS_URL", "REDIS_CLUSTER", "REDIS_SENTINEL"}
)

// Register defines -redis, -redis-cluster and -redis-sentinel on fs and
// reads their environment fallbacks with getenv (os.Getenv in a command).
func Register(fs *flag.FlagSet, getenv func(string) string) *Flags {
	f := &Flags{fs: fs, envURL: getenv(envNames[0]), envCl: getenv(envNames[1]), envSntnl: getenv(envNames[2])}
	fs.StringVar(&f.url, flagNames[0], "", "Redis `URL` (redis://[user:password@]host:port[/db], rediss://... for TLS) of a single server (default $REDIS_URL)")
	fs.StringVar(&f.cluster, flagNames[1], "", "Redis Cluster seed nodes, `ADDR[,ADDR...]` (host:port) (default $REDIS_CLUSTER)")
	fs.StringVar(&f.sentinel, flagNames[2], "", "master watched by Sentinels, `NAME@ADDR[,ADDR...]`: the master's name and the Sentinels' host:port (default $REDIS_SENTINEL)")
	return f
}

// Topology is a parsed choice of Redis.
type Topology struct {
	// Kind is None, Single, Cluster or Sentinel.
	Kind string
	// URL is the -redis URL (Single).
	URL string
	// Addrs are the seed nodes (Cluster) or the Sentinels (Sentinel).
	Addrs []string
	// Master is the name the Sentinels know the master by (Sentinel).
	Master string
	// From says where the choice came from ("-redis-cluster",
	// "$REDIS_URL", ...), for messages.
	From string
}

// ErrUsage is wrapped by the errors of Topology: the command line or the
// environment is wrong, which a command reports with exit status 2.
var ErrUsage = errors.New("usage")

// Topology returns the Redis the flags (after fs.Parse) name or, when
// none of the three flags was given, the environment. A flag given empty
// (-redis=) names none, which keeps everything in memory whatever the
// environment says. Naming two of them on the command line, or (without
// flags) in the environment, is an error, as is a malformed value; all
// wrap ErrUsage.
func (f *Flags) Topology() (Topology, error) {
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	vals := [3]string{f.url, f.cluster, f.sentinel}
	from := [3]string{"-" + flagNames[0], "-" + flagNames[1], "-" + flagNames[2]}
	if !set[flagNames[0]] && !set[flagNames[1]] && !set[flagNames[2]] {
		vals = [3]string{f.envURL, f.envCl, f.envSntnl}
		from = [3]string{"$" + envNames[0], "$" + envNames[1], "$" + envNames[2]}
	}
	chosen := -1
	for i, v := range vals {
		if strings.TrimSpace(v) == "" {
			continue
		}
		if chosen >= 0 {
			return Topology{}, fmt.Errorf("%w: %s and %s both name a Redis; give one", ErrUsage, from[chosen], from[i])
		}
		chosen = i
	}
	if chosen < 0 {
		return Topology{}, nil
	}
	v, src := strings.TrimSpace(vals[chosen]), from[chosen]
	bad := func(format string, a ...any) (Topology, error) {
		return Topology{}, fmt.Errorf("%w: %s: %s", ErrUsage, src, fmt.Sprintf(format, a...))
	}
	switch chosen {
	case 0:
		if _, err := redis.ParseURL(v); err != nil {
			return bad("%v", err)
		}
		return Topology{Kind: Single, URL: v, From: src}, nil
	case 1:
		addrs, err := parseAddrs(v)
		if err != nil {
			return bad("%v", err)
		}
		return Topology{Kind: Cluster, Addrs: addrs, From: src}, nil
	default:
		name, list, ok := strings.Cut(v, "@")
		if !ok || name == "" {
			return bad("want NAME@ADDR[,ADDR...], the master's name, @, and the Sentinels' addresses")
		}
		addrs, err := parseAddrs(list)
		if err != nil {
			return bad("%v", err)
		}
		return Topology{Kind: Sentinel, Master: name, Addrs: addrs, From: src}, nil
	}
}

// parseAddrs parses a comma-separated list of host:port.
func parseAddrs(s string) ([]string, error) {
	var addrs []string
	for a := range strings.SplitSeq(s, ",") {
		a = strings.TrimSpace(a)
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("%q is not host:port", a)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, errors.New("no address")
	}
	return addrs, nil
}

// NewClient returns a client of t (nil for None), built by
// redisstore.NewClient with the settings that package asks for: a
// *redis.Client for a single server, a *redis.ClusterClient for a cluster,
// a failover client (redis.NewFailoverClient, which follows the master the
// Sentinels name) for Sentinel. poolSize, if positive, is the connection
// pool's size (per node on a cluster).
func NewClient(t Topology, poolSize int) (redis.UniversalClient, error) {
	var (
		kind redisstore.Kind
		u    *url.URL
		err  error
	)
	q := url.Values{}
	switch t.Kind {
	case None:
		return nil, nil
	case Single:
		kind = redisstore.Single
		if u, err = url.Parse(t.URL); err != nil {
			return nil, fmt.Errorf("%w: %s: malformed URL", ErrUsage, t.From)
		}
		q = u.Query()
	case Cluster, Sentinel:
		if len(t.Addrs) == 0 {
			return nil, fmt.Errorf("%w: %s: no address", ErrUsage, t.From)
		}
		kind = redisstore.Cluster
		u = &url.URL{Scheme: "redis", Host: t.Addrs[0]}
		q["addr"] = t.Addrs[1:]
		if t.Kind == Sentinel {
			kind = redisstore.Sentinel
			q.Set("master_name", t.Master)
		}
	default:
		return nil, fmt.Errorf("redisflag: unknown kind %q", t.Kind)
	}
	if poolSize > 0 {
		q.Set("pool_size", strconv.Itoa(poolSize))
	}
	u.RawQuery = q.Encode()
	c, err := redisstore.NewClient(kind, u.String())
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUsage, t.From, err)
	}
	return c, nil
}

// String describes t for a start-up message.
func (t Topology) String() string {
	switch t.Kind {
	case Single:
		if u, err := url.Parse(t.URL); err == nil {
			return "Redis at " + u.Redacted()
		}
		return "Redis at " + t.URL
	case Cluster:
		return "the Redis Cluster of " + strings.Join(t.Addrs, ", ")
	case Sentinel:
		return "the Redis master " + t.Master + " of the Sentinels " + strings.Join(t.Addrs, ", ")
	}
	return "memory"
}
