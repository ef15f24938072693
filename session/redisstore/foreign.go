package redisstore

import "github.com/redis/go-redis/v9"

// foreign reports whether err is Redis's answer to a command on a key
// holding another type than the command works on (WRONGTYPE): a value the
// store never wrote there. Every call reads such a key as holding the
// empty value of the type it expects, which is what undecodable bytes
// read as (see "Foreign values" in the package documentation).
//
// Commands sent on their own are checked here; the store's Lua scripts
// check the replies of redis.pcall for the same error themselves.
func foreign(err error) bool {
	return redis.HasErrorPrefix(err, "WRONGTYPE")
}
