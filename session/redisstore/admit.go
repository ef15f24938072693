package redisstore

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/session"
)

// kindOwner is the suffix of the list of an owner's admitted sessions.
const kindOwner = "o"

// admitSlack is how much longer than the max of Admit an owner's list
// may be and still be one the store wrote: Admit cuts it to max, and
// only concurrent Admits for the owner lengthen it meanwhile.
const admitSlack = 1024

// admitScript keeps the list KEYS[1] of an owner's session ids, oldest
// first. ARGV: the id to append ("" for none), its TTL in ms (the list
// lives at least that long), max, the mode ("peek": return the whole list
// if it is longer than max; "trim": cut it to the newest max and return
// what was cut), then ids to remove first (sessions found gone).
//
// A key of another type, or a list longer than max+admitSlack when a
// "peek" begins, is not a list the store wrote: it reads as the empty
// list, and is deleted before anything else, so that what Admit does and
// returns stays bounded by max whatever the key held. (The "trim" that may
// follow a peek is bounded by the ids the peek returned.)
var admitScript = redis.NewScript(`
local n = redis.pcall('LLEN', KEYS[1])
if type(n) == 'table' then
  if not string.find(n.err, '^WRONGTYPE') then return n end
  redis.call('DEL', KEYS[1])
elseif ARGV[4] == 'peek' and n > tonumber(ARGV[3]) + ` + strconv.Itoa(admitSlack) + ` then
  redis.call('DEL', KEYS[1])
end
for i = 5, #ARGV do redis.call('LREM', KEYS[1], 0, ARGV[i]) end
if ARGV[1] ~= '' then
  redis.call('RPUSH', KEYS[1], ARGV[1])
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
end
n = redis.call('LLEN', KEYS[1])
local max = tonumber(ARGV[3])
if n <= max then return {} end
if ARGV[4] == 'peek' then return redis.call('LRANGE', KEYS[1], 0, -1) end
local out = redis.call('LRANGE', KEYS[1], 0, n - max - 1)
redis.call('LTRIM', KEYS[1], n - max, -1)
return out
`)

// Admit implements [session.Store]. The owner's session ids are a list
// under "<prefix>{owner/<owner>}:o", living as long as the newest
// session's TTL. Under the limit it costs one round trip (a Lua script
// that appends the id). Over it, the sessions of the listed ids are
// checked (one pipelined round trip of EXISTS), a second script removes
// the ids of sessions that are gone and cuts the list to the newest max,
// and each session cut is deleted as by [Store.Delete]. The list is only
// changed by scripts, so concurrent calls on any replica cut each id once.
func (s *Store) Admit(ctx context.Context, sess *session.Session, max int) ([]string, error) {
	if max < 1 {
		return nil, nil
	}
	if err := s.br.allow(); err != nil {
		return nil, unavailable("admit", err)
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	ended, err := s.admit(octx, sess, max)
	s.observe(ctx, err)
	return ended, err
}

// admit is Admit once the breaker let it through.
func (s *Store) admit(ctx context.Context, sess *session.Session, max int) ([]string, error) {
	key := s.key("owner/"+sess.Owner, kindOwner)
	ttl := millis(ttlOf(sess))
	ids, err := s.admitList(ctx, key, sess.ID, ttl, max, "peek")
	if err != nil {
		return nil, unavailable("admit", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// Over the limit: sessions that expired or were deleted do not count.
	exists := make([]*redis.IntCmd, len(ids))
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			exists[i] = p.Exists(ctx, s.key(id, kindSession))
		}
		return nil
	})
	if err != nil {
		return nil, unavailable("admit", err)
	}
	args := []any{"", ttl, max, "trim"}
	for i, id := range ids {
		if exists[i].Val() == 0 {
			args = append(args, id)
		}
	}
	ended, err := s.admitList(ctx, key, args...)
	if err != nil {
		return nil, unavailable("admit", err)
	}
	for _, id := range ended {
		if err := s.Delete(ctx, id); err != nil {
			return ended, err
		}
	}
	return ended, nil
}

// admitList runs admitScript on key, followed by a WAIT with
// Options.WaitReplicas, and returns the ids it returned.
func (s *Store) admitList(ctx context.Context, key string, args ...any) ([]string, error) {
	var cmd *redis.Cmd
	var err error
	if s.waitReplicas <= 0 {
		cmd = admitScript.Run(ctx, s.c, []string{key}, args...)
	} else if cmd, err = s.replicatedScript(ctx, admitScript, key, args...); err != nil {
		return nil, err
	}
	ids, err := cmd.StringSlice()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return ids, err
}
