package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// allCaps is every capability the codec names.
var allCaps = func() session.Capabilities {
	var c session.Capabilities
	for _, e := range capNames {
		c |= e.c
	}
	return c
}()

// v1AllCaps are the capabilities a version-1 record can hold: those that
// existed when version 1 was written (v1Caps); a later one has no bit there.
var v1AllCaps = func() session.Capabilities {
	var c session.Capabilities
	for _, e := range v1Caps {
		c |= e
	}
	return c
}()

func TestCodecRoundTrip(t *testing.T) {
	for _, s := range []*session.Session{
		{ID: "empty"},
		sample("s1"),
		{
			ID: "full", Owner: "4:acme/alice", ProtocolVersion: "2025-11-25",
			ClientName: "ünïcødé", ClientVersion: strings.Repeat("v", 300),
			Capabilities: allCaps, Initialized: true, LogLevel: "emergency",
			Subscriptions: []string{"file:///a", "", "x://\x00\xff"}, TTL: -time.Nanosecond,
			Created: time.UnixMilli(1),
		},
		{ID: "ttl", TTL: math.MaxInt64},
	} {
		rec := encodeSession(s)
		got, err := decodeSession(s.ID, string(rec))
		if err != nil {
			t.Fatalf("%s: %v", s.ID, err)
		}
		if fmt.Sprintf("%#v", *got) != fmt.Sprintf("%#v", *s) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", *got, *s)
		}
	}
}

// TestCodecEveryCapability: every capability the session package names
// is stored under a name of its own and comes back, alone and with every
// other; bits that name no capability are not stored.
func TestCodecEveryCapability(t *testing.T) {
	names := map[string]bool{}
	for _, e := range capNames {
		if names[e.name] {
			t.Fatalf("name %q used twice", e.name)
		}
		names[e.name] = true
	}
	for bit := range 16 {
		c := session.Capabilities(1 << bit)
		if strings.HasPrefix(c.String(), "0x") {
			continue // names no capability
		}
		if allCaps&c == 0 {
			t.Fatalf("capability %v has no stored name", c)
		}
	}
	for c := range session.Capabilities(math.MaxUint16) {
		s := sample("s")
		s.Capabilities = c
		got, err := decodeSession("s", string(encodeSession(s)))
		if err != nil || got.Capabilities != c&allCaps {
			t.Fatalf("capabilities %v come back as %v, %v", c, got.Capabilities, err)
		}
	}
}

// TestCodecGolden: this version writes the version-2 bytes, and reads
// both versions' bytes as the same session.
func TestCodecGolden(t *testing.T) {
	for _, tc := range []struct {
		s      session.Session
		v1, v2 string
	}{
		{goldenSession, goldenV1, goldenV2},
		{session.Session{ID: "g"}, goldenEmptyV1, goldenEmptyV2},
	} {
		if got := string(encodeSession(&tc.s)); got != tc.v2 {
			t.Errorf("encodeSession(%+v) =\n %q, want\n %q", tc.s, got, tc.v2)
		}
		if got := string(encodeSessionV1(&tc.s)); got != tc.v1 {
			t.Errorf("the version-1 encoder of this test writes\n %q, want\n %q", got, tc.v1)
		}
		for _, rec := range []string{tc.v1, tc.v2} {
			got, err := decodeSession("g", rec)
			if err != nil || fmt.Sprint(*got) != fmt.Sprint(tc.s) {
				t.Errorf("decodeSession(%q) = %+v, %v; want %+v", rec, got, err, tc.s)
			}
		}
	}
}

// encodeSessionV1 is the encoder of version 1, as it was, for the tests:
// capabilities as the uvarint of their bits, numbered as the constants
// were then.
func encodeSessionV1(s *session.Session) []byte {
	imm := appendImmutable(nil, s)
	b := []byte{recordV1}
	b = strconv.AppendInt(b, millis(ttlOf(s)), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(len(imm)), 10)
	b = append(b, ':')
	b = append(b, imm...)
	b = appendString(b, s.ProtocolVersion)
	b = appendString(b, s.ClientName)
	b = appendString(b, s.ClientVersion)
	var bits uint64
	for i, c := range v1Caps {
		if s.Capabilities.Has(c) {
			bits |= 1 << i
		}
	}
	b = binary.AppendUvarint(b, bits)
	b = binary.AppendVarint(b, int64(s.TTL))
	var flags byte
	if s.Initialized {
		flags |= 1
	}
	b = append(b, flags)
	b = appendString(b, s.LogLevel)
	b = binary.AppendUvarint(b, uint64(len(s.Subscriptions)))
	for _, u := range s.Subscriptions {
		b = appendString(b, u)
	}
	return b
}

// TestCodecUnknownNames: names a newer release may write are ignored, not
// an error; a count beyond the record is.
func TestCodecUnknownNames(t *testing.T) {
	rec := strings.Replace(goldenV2,
		"\x03\x10elicitation.form\x08sampling\x11roots.listChanged",
		"\x05\x10elicitation.form\x0ctasks.future\x08sampling\x00\x11roots.listChanged", 1)
	got, err := decodeSession("g", rec)
	if err != nil || fmt.Sprint(*got) != fmt.Sprint(goldenSession) {
		t.Fatalf("with unknown names: %+v, %v", got, err)
	}
	for _, bad := range []string{
		strings.Replace(goldenV2, "\x03\x10elicitation.form", "\x7f\x10elicitation.form", 1),
		strings.Replace(goldenV2, "\x03\x10elicitation.form", "\x03\x7felicitation.form", 1),
	} {
		if _, err := decodeSession("g", bad); !errors.Is(err, errCorrupt) {
			t.Errorf("decodeSession(%q) = %v, want errCorrupt", bad, err)
		}
	}
}

// TestCodecCreated: the creation time rides in the capability list, to
// the millisecond, where a reader that does not know it ignores it (as
// this one ignores names it does not know); a value that is not a time is
// ignored too.
func TestCodecCreated(t *testing.T) {
	s := sample("s1")
	s.Created = time.UnixMilli(1_767_225_600_123)
	rec := string(encodeSession(s))
	if !strings.Contains(rec, "\x15created=1767225600123") {
		t.Fatalf("record %q lacks the creation entry", rec)
	}
	got, err := decodeSession("s1", rec)
	if err != nil || !got.Created.Equal(s.Created) || got.Capabilities != s.Capabilities {
		t.Fatalf("decoded %+v, %v; want created %v", got, err, s.Created)
	}
	if capByName("created=1767225600123") != 0 {
		t.Fatal("the creation entry names a capability")
	}
	for _, v := range []string{"created=-5", "created=x", "created=", "created=99999999999999999999"} {
		bad := strings.Replace(rec, "\x15created=1767225600123", string(rune(len(v)))+v, 1)
		got, err := decodeSession("s1", bad)
		if err != nil || !got.Created.IsZero() || got.Capabilities != s.Capabilities {
			t.Errorf("with %q: %+v, %v; want a session created at an unknown time", v, got, err)
		}
	}
	s.Created = time.Time{}
	if rec := string(encodeSession(s)); strings.Contains(rec, "created=") {
		t.Fatalf("a zero creation time is stored: %q", rec)
	}
}

// TestCodecSize: the record stays compact: 90 bytes for this session when
// its two capabilities took one byte, and not a byte more than their
// names now take.
func TestCodecSize(t *testing.T) {
	s := sample("s1")
	s.Subscriptions = []string{"file:///project/README.md"}
	names := len("elicitation.form") + 1 + len("sampling") + 1 // each with its length
	rec := encodeSession(s)
	if len(rec) > 90+names {
		t.Fatalf("record of %d bytes: %q", len(rec), rec)
	}
	t.Logf("%d bytes: %q", len(rec), rec)
}

// TestV1RecordInRedis: a session written by the previous release is
// served as it was by this one: Get reads it and restarts its TTL from its
// header, and Update keeps its owner and rewrites it as version 2.
func TestV1RecordInRedis(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	st := newStoreOn(t, c, prefix)
	key := prefix + "{g}:s"
	if err := c.Set(ctx, key, goldenV1, time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, "g")
	if err != nil || fmt.Sprint(*got) != fmt.Sprint(goldenSession) {
		t.Fatalf("Get of a version-1 record = %+v, %v", got, err)
	}
	if d := c.PTTL(ctx, key).Val(); d <= 50*time.Second {
		t.Fatalf("Get of a version-1 record left PTTL %v, want its TTL of 1m", d)
	}
	got.Owner, got.LogLevel, got.Capabilities = "7:globex/carol", "debug", session.CapRoots|session.CapElicitationURL
	if err := st.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	raw := c.Get(ctx, key).Val()
	if raw == "" || raw[0] != recordV2 {
		t.Fatalf("Update left %q, want a version-2 record", raw)
	}
	want := *got
	want.Owner = goldenSession.Owner
	if again, err := st.Get(ctx, "g"); err != nil || fmt.Sprint(*again) != fmt.Sprint(want) {
		t.Fatalf("after Update: %+v, %v; want %+v", again, err, want)
	}
}

// FuzzDecode: no input makes decoding panic, and what decodes re-encodes
// to a record that decodes to the same session.
func FuzzDecode(f *testing.F) {
	f.Add(string(encodeSession(sample("s1"))))
	s := sample("s2")
	s.Subscriptions = []string{"a", "b"}
	s.Initialized = true
	f.Add(string(encodeSession(s)))
	f.Add("\x0160000:0:")
	f.Add("\x01" + "1:1:\x00")
	for _, v := range []string{goldenV1, goldenV2, goldenEmptyV1, goldenEmptyV2, "\x02" + "1:1:\x00"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		s, err := decodeSession("id", v)
		if err != nil {
			return
		}
		if s.Capabilities&^allCaps != 0 {
			t.Fatalf("%q decodes to capabilities %v that have no name", v, s.Capabilities)
		}
		again, err := decodeSession("id", string(encodeSession(s)))
		if err != nil || fmt.Sprintf("%#v", *again) != fmt.Sprintf("%#v", *s) {
			t.Fatalf("%q decodes to %#v, which re-encodes to %#v, %v", v, *s, again, err)
		}
	})
}

// FuzzVersions: any session written by the version-1 encoder (whose
// capabilities are those of v1Caps) decodes to what it held, exactly as
// the same session written now does.
func FuzzVersions(f *testing.F) {
	f.Add("4:acme/alice", "2025-11-25", "client", "1.0", uint16(5), int64(time.Minute), true, "info", "file:///a")
	f.Add("", "", "", "", uint16(math.MaxUint16), int64(-1), false, "", "")
	f.Fuzz(func(t *testing.T, owner, pv, name, ver string, caps uint16, ttl int64, init bool, level, sub string) {
		s := &session.Session{ID: "id", Owner: owner, ProtocolVersion: pv, ClientName: name, ClientVersion: ver,
			Capabilities: session.Capabilities(caps) & v1AllCaps, TTL: time.Duration(ttl), Initialized: init, LogLevel: level}
		if sub != "" {
			s.Subscriptions = strings.Split(sub, "\n")
		}
		v1, err1 := decodeSession("id", string(encodeSessionV1(s)))
		v2, err2 := decodeSession("id", string(encodeSession(s)))
		if err1 != nil || err2 != nil || fmt.Sprintf("%#v", *v1) != fmt.Sprintf("%#v", *s) || fmt.Sprintf("%#v", *v2) != fmt.Sprintf("%#v", *s) {
			t.Fatalf("%#v reads back as\n v1 %#v, %v\n v2 %#v, %v", *s, v1, err1, v2, err2)
		}
	})
}
