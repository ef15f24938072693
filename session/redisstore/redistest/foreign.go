package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Types are the Redis types a value may have, as TYPE names them: what
// something else with write access to Redis may leave at any key.
var Types = []string{"string", "list", "hash", "set", "zset", "stream"}

// Garbage is what the values [Replace] writes hold: bytes no caller
// decodes.
const Garbage = "\x00garbage\xff"

// Replace replaces whatever key holds by a value of type typ (one of
// [Types]) that holds [Garbage] — the string itself, or one element,
// field or member — without expiry, as an attacker with write access to
// Redis would. It fails the test on error.
func Replace(t testing.TB, c redis.UniversalClient, key, typ string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		switch typ {
		case "string":
			p.Set(ctx, key, Garbage, 0)
		case "list":
			p.RPush(ctx, key, Garbage)
		case "hash":
			p.HSet(ctx, key, "f", Garbage)
		case "set":
			p.SAdd(ctx, key, Garbage)
		case "zset":
			p.ZAdd(ctx, key, redis.Z{Score: 1, Member: Garbage})
		case "stream":
			p.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []string{"f", Garbage}})
		default:
			t.Fatalf("redistest: Replace: no Redis type %q", typ)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("redistest: Replace(%q, %s): %v", key, typ, err)
	}
}
