package redisstore

import (
	"testing"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
	"github.com/mcphandler/mcphandler/session/sessiontest"
)

// TestClusterConformance runs the suite every session.Store must pass on a
// Redis Cluster, through go-redis's cluster client, which refuses a
// transaction across slots as the cluster refuses a command or script
// across slots.
func TestClusterConformance(t *testing.T) {
	cl := redistest.SharedCluster(t)
	sessiontest.Run(t, func(t *testing.T) session.Store {
		c := cl.Client(t)
		return newStoreOn(t, c, redistest.Prefix(t, c))
	})
}

// TestSentinelConformance runs the suite on a master watched by Sentinels,
// through go-redis's failover client.
func TestSentinelConformance(t *testing.T) {
	s := redistest.SharedSentinel(t)
	sessiontest.Run(t, func(t *testing.T) session.Store {
		c := s.Client(t)
		return newStoreOn(t, c, redistest.Prefix(t, c))
	})
}
