package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// FuzzStoredSession: whatever bytes a session key holds in Redis, the
// parsers that read them — the Lua scripts of Get and Update, which read
// the header and the owner in Redis, and the Go decoder — agree, and
// none of them makes a call fail as if Redis were down:
//
//   - Get, through GETEX and through its script, never answers
//     ErrUnavailable, and returns a session exactly when the value
//     decodes (FuzzDecode fuzzes the decoder alone);
//   - Update never answers ErrUnavailable; when it succeeds, the record
//     it wrote keeps the owner the value held, and reads back as the
//     session it was given with that owner.
//
// It runs on real Redis, on a store whose breaker opens at the first
// failure it counts.
func FuzzStoredSession(f *testing.F) {
	f.Add(string(encodeSession(sample("s1"))))
	for _, v := range []string{goldenV1, goldenV2, goldenEmptyV1, goldenEmptyV2, "", "garbage", "\x0160000:0:", "\x02" + "1:1:\x00"} {
		f.Add(v)
	}
	good := string(encodeSession(sample("x")))
	rest := good[strings.Index(good, ":"):]
	// Header TTLs no record has: too long for PEXPIRE, overflowing,
	// zero, and an owner length far beyond the value.
	for _, ttl := range []string{"99999999999999999999", "9223372036854775807", "0", "000000000000000000001"} {
		f.Add("\x02" + ttl + rest)
	}
	f.Add("\x0260000:99999999999999999999999999:x")
	c := redistest.Client(f)
	st := newStoreWith(f, c, Options{Prefix: redistest.Prefix(f, c),
		BreakerThreshold: 1, BreakerMinBackoff: time.Hour, BreakerMaxBackoff: time.Hour})
	k := st.key("fuzz", kindSession)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, v string) {
		want, werr := decodeSession("fuzz", v)
		for _, hint := range []int64{0, 60000} { // the script, then GETEX first
			if err := c.Set(ctx, k, v, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			st.ttlHint.Store(hint)
			got, err := st.Get(ctx, "fuzz")
			switch {
			case errors.Is(err, session.ErrUnavailable):
				t.Fatalf("Get of %q (hint %d): %v", v, hint, err)
			case (err == nil) != (werr == nil):
				t.Fatalf("Get of %q (hint %d): %v; the decoder says %v", v, hint, err, werr)
			case err == nil && fmt.Sprintf("%#v", *got) != fmt.Sprintf("%#v", *want):
				t.Fatalf("Get of %q (hint %d): %#v; the decoder says %#v", v, hint, *got, *want)
			}
		}

		if err := c.Set(ctx, k, v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		s := sample("fuzz")
		s.Owner = "someone else"
		err := st.Update(ctx, s)
		if err != nil {
			if !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("Update over %q: %v", v, err)
			}
			return
		}
		owner, ok := storedOwner(v)
		got, gerr := st.Get(ctx, "fuzz")
		switch {
		case !ok:
			t.Fatalf("Update over %q, whose owner Go cannot find, succeeded", v)
		case gerr != nil:
			// The owner part is complete but does not decode: the
			// record stays unreadable.
			if _, err := decodeSession("fuzz", string(appendImmutableRaw(owner))); err == nil {
				t.Fatalf("after Update over %q: %v", v, gerr)
			}
		default:
			r := reader{s: owner}
			s.Owner = r.string()
			if r.err || len(r.s) != 0 || fmt.Sprintf("%#v", *got) != fmt.Sprintf("%#v", *s) {
				t.Fatalf("after Update over %q: %#v, want %#v with the owner part %q", v, *got, *s, owner)
			}
		}
	})
}

// storedOwner returns the immutable part (the encoded owner) of a session
// record as updateScript finds it — a version byte, digits, ':', the
// part's length in digits, ':' — or false where the script finds none.
func storedOwner(v string) (string, bool) {
	if len(v) == 0 || v[0] != recordV1 && v[0] != recordV2 {
		return "", false
	}
	rest := v[1:]
	digits := func() (string, bool) {
		i := 0
		for i < len(rest) && '0' <= rest[i] && rest[i] <= '9' {
			i++
		}
		if i == 0 || i == len(rest) || rest[i] != ':' {
			return "", false
		}
		d := rest[:i]
		rest = rest[i+1:]
		return d, true
	}
	if _, ok := digits(); !ok {
		return "", false
	}
	d, ok := digits()
	if !ok {
		return "", false
	}
	n, err := strconv.ParseUint(d, 10, 64)
	if err != nil || n > uint64(len(rest)) {
		return "", false
	}
	return rest[:n], true
}

// appendImmutableRaw is a record of the sample's mutable part after the
// given immutable part, as Update writes it.
func appendImmutableRaw(imm string) []byte {
	b := []byte("\x0260000:" + strconv.Itoa(len(imm)) + ":" + imm)
	return appendMutable(b, sample("fuzz"))
}
