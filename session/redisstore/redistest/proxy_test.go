package redistest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// noRetries returns a client through p that reports every network error
// instead of retrying the command on a new connection.
func noRetries(t *testing.T, p *Proxy) *redis.Client {
	t.Helper()
	c := p.Client(t).(*redis.Client)
	opt := *c.Options()
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	nc := redis.NewClient(&opt)
	t.Cleanup(func() { nc.Close() })
	return nc
}

// isNetErr reports whether err is what a client sees when its connection
// is closed under it: EOF, a reset, or a write to a closed socket.
func isNetErr(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.As(err, &ne)
}

func TestProxyForwards(t *testing.T) {
	ctx := context.Background()
	p := NewProxy(t, "")
	c := p.Client(t)
	prefix := Prefix(t, Client(t))
	if err := c.Set(ctx, prefix+"k", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, prefix+"k").Result(); err != nil || v != "v" {
		t.Fatalf("Get through the proxy = %q, %v", v, err)
	}
	// A large value crosses in many reads, and Pub/Sub works too.
	big := bytes.Repeat([]byte("x"), 1<<20)
	if err := c.Set(ctx, prefix+"big", big, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, prefix+"big").Bytes(); err != nil || !bytes.Equal(v, big) {
		t.Fatalf("a 1 MiB value through the proxy: %d bytes, %v", len(v), err)
	}
	ps := c.Subscribe(ctx, prefix+"ch")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	if n, err := c.Publish(ctx, prefix+"ch", "hi").Result(); err != nil || n != 1 {
		t.Fatalf("Publish = %d, %v", n, err)
	}
	m, err := ps.ReceiveMessage(ctx)
	if err != nil || m.Payload != "hi" {
		t.Fatalf("ReceiveMessage = %+v, %v", m, err)
	}
}

// TestProxyLatency: each direction's delay is added to every round trip,
// so a deadline shorter than the round trip fails, and removing the delay
// makes it fast again.
func TestProxyLatency(t *testing.T) {
	ctx := context.Background()
	p := NewProxy(t, "")
	c := noRetries(t, p)
	if err := c.Ping(ctx).Err(); err != nil { // open the connection first
		t.Fatal(err)
	}
	p.SetLatency(40*time.Millisecond, 30*time.Millisecond)
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 70*time.Millisecond {
		t.Fatalf("a round trip with 40+30 ms of latency took %v", d)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := c.Ping(short).Err(); !isNetErr(err) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a 20 ms deadline with 70 ms round trips: %v, want a timeout", err)
	}
	p.SetLatency(0, 0)
	for range 10 {
		start = time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 50*time.Millisecond {
			return
		}
	}
	t.Fatal("round trips stay slow after the latency was removed")
}

// TestProxyStall: a stalled proxy holds connections open and answers
// nothing, so commands time out; what was sent meanwhile reaches Redis on
// Resume, and commands work again.
func TestProxyStall(t *testing.T) {
	ctx := context.Background()
	p := NewProxy(t, "")
	c := noRetries(t, p)
	direct := Client(t)
	prefix := Prefix(t, direct)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.Stall()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Set(short, prefix+"k", "v", time.Minute).Err()
	if err == nil || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("SET on a stalled proxy: %v after %v, want a timeout after 200ms", err, time.Since(start))
	}
	// New connections are accepted, and answer nothing either.
	nc, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("a stalled proxy refused a connection: %v", err)
	}
	defer nc.Close()
	nc.Write([]byte("PING\r\n"))
	nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := nc.Read(make([]byte, 16)); !isNetErr(err) {
		t.Fatalf("a new connection to a stalled proxy read %v, want a timeout", err)
	}
	if n := direct.Exists(ctx, prefix+"k").Val(); n != 0 {
		t.Fatal("the SET reached Redis while the proxy was stalled")
	}
	p.Resume()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	// The SET sent before the client gave up arrives now, as a frozen
	// Redis would read it when it wakes up.
	for deadline := time.Now().Add(5 * time.Second); direct.Exists(ctx, prefix+"k").Val() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the SET held by the stall never reached Redis")
		}
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := io.ReadAll(io.LimitReader(nc, 7)); err != nil || string(line) != "+PONG\r\n" {
		t.Fatalf("the held PING got %q, %v", line, err)
	}
}

// TestProxyCutAll: a command in flight fails at once when its connection
// is cut, and the next one works on a new connection.
func TestProxyCutAll(t *testing.T) {
	ctx := context.Background()
	p := NewProxy(t, "")
	c := noRetries(t, p)
	prefix := Prefix(t, Client(t))
	errc := make(chan error, 1)
	go func() { errc <- c.BLPop(ctx, 10*time.Second, prefix+"empty").Err() }()
	time.Sleep(100 * time.Millisecond) // let BLPOP reach Redis
	start := time.Now()
	p.CutAll()
	select {
	case err := <-errc:
		if !isNetErr(err) {
			t.Fatalf("BLPOP on a cut connection: %v, want EOF or a reset", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("BLPOP still waits 5s after its connection was cut")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("BLPOP noticed the cut after %v", d)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("after CutAll: %v", err)
	}
}

// TestProxyRefuse: while refusing, dials fail with "connection refused"
// and open connections keep working; after AcceptConnections, dials work.
func TestProxyRefuse(t *testing.T) {
	ctx := context.Background()
	p := NewProxy(t, "")
	c := noRetries(t, p)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.RefuseConnections()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("an open connection while refusing new ones: %v", err)
	}
	if _, err := net.Dial("tcp", p.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial while refusing: %v, want connection refused", err)
	}
	p.CutAll()
	// The first PING may still find the cut connection in the pool and
	// read EOF on it; the next ones must dial.
	for i := 0; ; i++ {
		err := c.Ping(ctx).Err()
		if errors.Is(err, syscall.ECONNREFUSED) {
			break
		}
		if i > 0 {
			t.Fatalf("PING on a refusing proxy: %v, want connection refused", err)
		}
	}
	p.AcceptConnections()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("after AcceptConnections: %v", err)
	}
}

// TestProxyCutAfter: a command cut after a few of its bytes fails on the
// client, and Redis, having received a truncated command, never runs it.
func TestProxyCutAfter(t *testing.T) {
	ctx := context.Background()
	p := NewProxy(t, "")
	c := noRetries(t, p)
	direct := Client(t)
	prefix := Prefix(t, direct)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.CutAfter(20)
	if err := c.Set(ctx, prefix+"k", bytes.Repeat([]byte("v"), 100), time.Minute).Err(); !isNetErr(err) {
		t.Fatalf("SET cut after 20 bytes: %v, want EOF or a reset", err)
	}
	if n := p.Cuts(); n != 1 {
		t.Fatalf("Cuts = %d, want 1", n)
	}
	if err := c.Set(ctx, prefix+"other", "v", time.Minute).Err(); err != nil {
		t.Fatalf("the cut is one-shot, but the next SET failed: %v", err)
	}
	if n := direct.Exists(ctx, prefix+"k").Val(); n != 0 {
		t.Fatal("Redis ran the truncated SET")
	}
}

// TestProxyCutOnCommand: the named command never reaches Redis, the
// commands sent before it on the same connection do, and the cuts stop
// after the count given.
func TestProxyCutOnCommand(t *testing.T) {
	ctx := context.Background()
	p := NewProxy(t, "")
	c := noRetries(t, p)
	direct := Client(t)
	prefix := Prefix(t, direct)
	script := redis.NewScript(`return redis.call('SET', KEYS[1], 'ran')`)
	if err := script.Load(ctx, direct).Err(); err != nil {
		t.Fatal(err)
	}

	p.CutOnCommand("evalsha", 1)
	_, err := c.Pipelined(ctx, func(pl redis.Pipeliner) error {
		pl.Set(ctx, prefix+"before", "1", time.Minute)
		script.EvalSha(ctx, pl, []string{prefix + "script"})
		pl.Set(ctx, prefix+"after", "1", time.Minute)
		return nil
	})
	if !isNetErr(err) {
		t.Fatalf("a pipeline cut at EVALSHA: %v, want EOF or a reset", err)
	}
	if direct.Exists(ctx, prefix+"before").Val() != 1 {
		t.Fatal("the command before EVALSHA did not reach Redis")
	}
	if direct.Exists(ctx, prefix+"script", prefix+"after").Val() != 0 {
		t.Fatal("EVALSHA, or the command after it, reached Redis")
	}
	if err := script.Run(ctx, c, []string{prefix + "script"}).Err(); err != nil {
		t.Fatalf("the second EVALSHA, after a one-shot cut: %v", err)
	}

	// PUBLISH, every time until cleared.
	sub := direct.Subscribe(ctx, prefix+"ch")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	p.CutOnCommand("PUBLISH", -1)
	for range 3 {
		if err := c.Publish(ctx, prefix+"ch", "lost").Err(); !isNetErr(err) {
			t.Fatalf("PUBLISH: %v, want EOF or a reset", err)
		}
	}
	p.ClearCuts()
	if n, err := c.Publish(ctx, prefix+"ch", "through").Result(); err != nil || n != 1 {
		t.Fatalf("PUBLISH after ClearCuts = %d, %v", n, err)
	}
	if m, err := sub.ReceiveMessage(ctx); err != nil || m.Payload != "through" {
		t.Fatalf("the subscriber got %+v, %v; want only the message sent after ClearCuts", m, err)
	}

	// SUBSCRIBE: the subscriber never gets its confirmation.
	p.CutOnCommand("SUBSCRIBE", 1)
	ps := c.Subscribe(ctx)
	defer ps.Close()
	if err := ps.Subscribe(ctx, prefix+"ch2"); err == nil {
		if _, err = ps.Receive(ctx); !isNetErr(err) {
			t.Fatalf("a cut SUBSCRIBE: %v, want EOF or a reset", err)
		}
	}
	if n := p.Cuts(); n != 5 {
		t.Fatalf("Cuts = %d, want 5", n)
	}
}

// TestScanner: the scanner finds every command's name however the stream
// is split, and forwards every byte.
func TestScanner(t *testing.T) {
	stream := []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nv\r\n\r\n" +
		"*1\r\n$4\r\nPING\r\n" +
		"PING hello\r\n" +
		"*2\r\n$7\r\nevalsha\r\n$0\r\n\r\n" +
		"*0\r\n" +
		"*1\r\n$9\r\nSUBSCRIBE\r\n")
	want := []string{"SET", "PING", "PING", "evalsha", "SUBSCRIBE"}
	for _, size := range []int{1, 2, 3, 7, len(stream)} {
		names, out := scanAll(stream, size)
		if !slices.Equal(names, want) {
			t.Errorf("split every %d bytes: names %q, want %q", size, names, want)
		}
		if !bytes.Equal(out, stream) {
			t.Errorf("split every %d bytes: forwarded %q", size, out)
		}
	}
}

// scanAll runs the scanner over stream in pieces of size bytes, as filter
// does, and returns the names seen and the bytes it let through.
func scanAll(stream []byte, size int) (names []string, out []byte) {
	var s scanner
	for len(stream) > 0 {
		b := stream[:min(size, len(stream))]
		stream = stream[len(b):]
		for len(b) > 0 {
			n, ev := s.step(b)
			if s.holding {
				s.held = append(s.held, b[:n]...)
			} else {
				out = append(out, b[:n]...)
			}
			b = b[n:]
			switch ev {
			case evName:
				names = append(names, string(s.name))
				fallthrough
			case evRelease:
				out = append(out, s.held...)
				s.held = s.held[:0]
				s.holding = false
			}
		}
	}
	return names, append(out, s.held...)
}

// FuzzScanner: on any input, the scanner never panics, loses or reorders
// no byte, and sees the same commands however the input is split.
func FuzzScanner(f *testing.F) {
	f.Add([]byte("*1\r\n$4\r\nPING\r\n"), 3)
	f.Add([]byte("PING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"), 1)
	f.Add([]byte("*-1\r\n$x\r\n"), 2)
	f.Fuzz(func(t *testing.T, stream []byte, size int) {
		size = 1 + int(uint(size)%64)
		whole, out := scanAll(stream, len(stream)+1)
		split, out2 := scanAll(stream, size)
		if !bytes.Equal(out, stream) || !bytes.Equal(out2, stream) {
			t.Fatalf("forwarded %q and %q, want %q", out, out2, stream)
		}
		if !slices.Equal(whole, split) {
			t.Fatalf("names %q whole, %q split every %d bytes", whole, split, size)
		}
	})
}
