package redistest

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Proxy is a TCP proxy between Redis clients and a Redis server that
// injects network faults on demand, for tests of what a store does when
// Redis is slow, frozen, unreachable or cut off mid-command:
//
//	p := redistest.NewProxy(t, "")  // in front of the Redis Client finds
//	c := p.Client(t)                // a client that connects through p
//	p.Stall()                       // Redis "freezes": nothing is forwarded
//	...
//	p.Resume()
//
// Each accepted connection gets its own connection to the target, and
// bytes are forwarded in order in both directions. The faults:
//
//   - [Proxy.SetLatency] delays every byte by a fixed time per direction;
//   - [Proxy.Stall] stops forwarding, holding every connection open (and
//     accepting new ones), as a Redis that stopped answering would, until
//     [Proxy.Resume];
//   - [Proxy.CutAll] closes every open connection at once;
//   - [Proxy.RefuseConnections] makes new connections fail as a stopped
//     Redis would (connection refused), until [Proxy.AcceptConnections];
//   - [Proxy.CutAfter] and [Proxy.CutOnCommand] close a connection in the
//     middle of what its client sends: after a number of bytes, or just
//     before a given command reaches Redis.
//
// A fault applies to the bytes read after it was set, and every method is
// safe for concurrent use. Faults are deterministic: nothing is random, and
// a cut closes both sides of the connection at once, so the client reads
// EOF or a reset.
//
// The proxy parses what clients send as RESP (arrays of bulk strings, as
// every client library sends, or inline commands) to find where commands
// begin; it holds the first bytes of each command until its name is known,
// which adds no delay for a client that writes whole commands. Behind TLS
// the bytes are opaque and CutOnCommand never fires.
//
// The proxy is closed when the test ends; Close stops every goroutine it
// started before returning.
type Proxy struct {
	t      testing.TB
	target string
	addr   string

	mu       sync.Mutex // guards everything below
	l        net.Listener
	conns    map[*proxyConn]struct{}
	latency  [2]time.Duration // by direction: up (client → Redis), down
	gate     chan struct{}    // non-nil while stalled; Resume closes it
	cutBytes int64            // bytes left before a cut; -1 when none is armed
	cutCmds  map[string]int   // upper-case command name -> cuts left (-1: no limit)
	cuts     int
	closed   bool

	wg sync.WaitGroup // the accept loop and every connection's goroutines
}

// Directions of a proxied connection.
const (
	up   = 0 // client → Redis
	down = 1 // Redis → client
)

// NewProxy starts a proxy on a free port of 127.0.0.1 that forwards to
// target (host:port), or, if target is empty, to the Redis [Client] finds
// (which must then be reached over TCP). The proxy starts with no fault,
// and is closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	if target == "" {
		opt := find(t)
		if opt.Network != "" && opt.Network != "tcp" {
			t.Fatalf("redistest: NewProxy: the test Redis is reached over %s, not TCP", opt.Network)
		}
		target = opt.Addr
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: NewProxy: %v", err)
	}
	p := &Proxy{
		t: t, target: target, addr: l.Addr().String(), l: l,
		conns: make(map[*proxyConn]struct{}), cutBytes: -1, cutCmds: make(map[string]int),
	}
	p.wg.Add(1)
	go p.serve(l)
	t.Cleanup(p.Close)
	return p
}

// Addr returns the address (host:port) clients connect to.
func (p *Proxy) Addr() string { return p.addr }

// Client returns a new client that connects through the proxy, with the
// settings of [Client] (and, when the proxy's target is the Redis Client
// finds, its database and credentials), closed when the test ends.
func (p *Proxy) Client(t testing.TB) redis.UniversalClient {
	t.Helper()
	opt := &redis.Options{Addr: p.addr}
	if found := find(t); found.Addr == p.target {
		o := *found
		o.Addr = p.addr
		opt = &o
	}
	c := redis.NewClient(tune(opt))
	t.Cleanup(func() { c.Close() })
	return c
}

// SetLatency delays every byte read from then on by up on its way from the
// client to Redis and by down on its way back, so a command's round trip
// takes at least up+down more. Zero removes the delay.
func (p *Proxy) SetLatency(up, down time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = [2]time.Duration{up, down}
}

// Stall stops forwarding in both directions: connections stay open, new
// ones are accepted, and what clients send is held, as a Redis that froze
// (SIGSTOP, a full disk, a stuck host) would hold it in its socket
// buffers. Resume forwards everything held, in order — even bytes of
// clients that hung up meanwhile, which a Redis waking up would still read.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate == nil && !p.closed {
		p.gate = make(chan struct{})
	}
}

// Resume ends a [Proxy.Stall].
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
}

// CutAll closes every open connection now, both sides, as a Redis that
// crashed or a network that dropped them would. New connections are
// accepted as before.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// RefuseConnections stops listening, so that new connections fail with
// "connection refused" as they do to a stopped Redis; open connections are
// not touched (call [Proxy.CutAll] too for a Redis that went down).
func (p *Proxy) RefuseConnections() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
}

// AcceptConnections listens again on the same address after
// [Proxy.RefuseConnections]. It fails the test if the address cannot be
// bound again, so call it from the test's goroutine.
func (p *Proxy) AcceptConnections() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil || p.closed {
		return
	}
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("redistest: Proxy.AcceptConnections: %v", err)
	}
	p.l = l
	p.wg.Add(1)
	go p.serve(l)
}

// CutAfter arms a one-shot cut: once n more bytes have been forwarded from
// clients to Redis (counting from now, across all connections), the
// connection that carried the n-th byte is closed, both sides, and the
// rest of what its client sent never reaches Redis. With n smaller than a
// command, Redis receives a truncated command and never runs it.
func (p *Proxy) CutAfter(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutBytes = int64(max(n, 0))
}

// CutOnCommand arms cuts on a command: the next n times a client sends the
// command name (case-insensitive, e.g. "EVALSHA", "PUBLISH", "SUBSCRIBE"),
// its connection is closed, both sides, at the start of that command:
// what the client sent before it is forwarded, the command and everything
// after it are not, so Redis never runs it. A negative n cuts every such
// command until [Proxy.ClearCuts]; zero disarms the name.
func (p *Proxy) CutOnCommand(name string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	name = strings.ToUpper(name)
	if n == 0 {
		delete(p.cutCmds, name)
		return
	}
	p.cutCmds[name] = n
}

// ClearCuts disarms every cut armed by [Proxy.CutAfter] and
// [Proxy.CutOnCommand].
func (p *Proxy) ClearCuts() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutBytes = -1
	clear(p.cutCmds)
}

// Cuts reports how many connections [Proxy.CutAfter] and
// [Proxy.CutOnCommand] have cut so far.
func (p *Proxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// Close stops the proxy: it stops listening, closes every connection and
// returns once all its goroutines have ended. It is safe to call more than
// once; the test's cleanup calls it.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	if p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
	p.mu.Unlock()
	p.CutAll()
	p.wg.Wait()
}

// serve accepts connections on l until l is closed.
func (p *Proxy) serve(l net.Listener) {
	defer p.wg.Done()
	for {
		nc, err := l.Accept()
		if err != nil {
			return
		}
		c := &proxyConn{p: p, client: nc, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			nc.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go c.run()
	}
}

// wait blocks while the proxy is stalled; it reports false if done closed
// first.
func (p *Proxy) wait(done <-chan struct{}) bool {
	for {
		p.mu.Lock()
		gate := p.gate
		p.mu.Unlock()
		if gate == nil {
			return true
		}
		select {
		case <-gate:
		case <-done:
			return false
		}
	}
}

// proxyConn is one client connection and its connection to the target.
type proxyConn struct {
	p      *Proxy
	client net.Conn
	server net.Conn // guarded by p.mu; nil until dialled
	done   chan struct{}
	once   sync.Once
	scan   scanner // of what the client sends; used by the up writer only
}

// chunk is bytes read from one side, to be written to the other at at.
type chunk struct {
	b  []byte
	at time.Time
}

// run dials the target and forwards both ways until either side fails or
// the connection is cut. It owns four goroutines (itself included): a
// reader and a writer per direction, so that latency is added to each
// byte rather than accumulated.
func (c *proxyConn) run() {
	defer c.p.wg.Done()
	defer c.close()
	server, err := net.DialTimeout("tcp", c.p.target, 5*time.Second)
	if err != nil {
		return
	}
	c.p.mu.Lock()
	select {
	case <-c.done:
		c.p.mu.Unlock()
		server.Close()
		return
	default:
	}
	c.server = server
	c.p.mu.Unlock()
	ups, downs := make(chan chunk, 64), make(chan chunk, 64)
	c.p.wg.Add(3)
	go func() { defer c.p.wg.Done(); c.read(c.client, ups, up) }()
	go func() { defer c.p.wg.Done(); c.write(server, ups, up) }()
	go func() { defer c.p.wg.Done(); c.read(server, downs, down) }()
	c.write(c.client, downs, down)
}

// close closes both sides once.
func (c *proxyConn) close() {
	c.once.Do(func() {
		c.p.mu.Lock()
		close(c.done)
		delete(c.p.conns, c)
		server := c.server
		c.p.mu.Unlock()
		c.client.Close()
		if server != nil {
			server.Close()
		}
	})
}

// read reads src into chunks stamped with their delivery time, and closes
// ch when src fails.
func (c *proxyConn) read(src net.Conn, ch chan<- chunk, dir int) {
	defer close(ch)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			c.p.mu.Lock()
			at := time.Now().Add(c.p.latency[dir])
			c.p.mu.Unlock()
			select {
			case ch <- chunk{b: append([]byte(nil), buf[:n]...), at: at}:
			case <-c.done:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// write writes the chunks of ch to dst at their time, unless stalled, and
// applies the cuts to what goes up. It closes the connection when ch ends,
// dst fails, or a cut fires.
func (c *proxyConn) write(dst net.Conn, ch <-chan chunk, dir int) {
	defer c.close()
	var t *time.Timer
	for {
		var ck chunk
		select {
		case v, ok := <-ch:
			if !ok {
				return
			}
			ck = v
		case <-c.done:
			return
		}
		if d := time.Until(ck.at); d > 0 {
			if t == nil {
				t = time.NewTimer(d)
				defer t.Stop()
			} else {
				t.Reset(d)
			}
			select {
			case <-t.C:
			case <-c.done:
				return
			}
		}
		if !c.p.wait(c.done) {
			return
		}
		b, cut := ck.b, false
		if dir == up {
			b, cut = c.filter(b)
		}
		if len(b) > 0 {
			if _, err := dst.Write(b); err != nil {
				return
			}
		}
		if cut {
			return
		}
	}
}

// filter returns the part of b to forward to Redis now (bytes of a command
// whose name is not known yet are held back), and whether the connection
// must be cut after it.
func (c *proxyConn) filter(b []byte) ([]byte, bool) {
	s := &c.scan
	out := make([]byte, 0, len(b)+len(s.held))
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
			if c.p.commandCut(s.name) {
				return c.p.forward(out, true)
			}
			fallthrough
		case evRelease:
			out = append(out, s.held...)
			s.held = s.held[:0]
			s.holding = false
		}
	}
	return c.p.forward(out, false)
}

// commandCut reports whether a cut is armed on the command name, and
// consumes it.
func (p *Proxy) commandCut(name []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.cutCmds) == 0 {
		return false
	}
	key := strings.ToUpper(string(name))
	n, ok := p.cutCmds[key]
	if !ok {
		return false
	}
	if n > 0 {
		if n--; n == 0 {
			delete(p.cutCmds, key)
		} else {
			p.cutCmds[key] = n
		}
	}
	return true
}

// forward applies an armed CutAfter to out, about to be forwarded to
// Redis: it returns the part to forward and whether to cut the connection
// after it (always, if cut is set), and counts the cut.
func (p *Proxy) forward(out []byte, cut bool) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cutBytes >= 0 {
		if int64(len(out)) >= p.cutBytes {
			out, cut = out[:p.cutBytes], true
			p.cutBytes = -1
		} else {
			p.cutBytes -= int64(len(out))
		}
	}
	if cut {
		p.cuts++
	}
	return out, cut
}

// Scanner states.
const (
	stCommand    = iota // at the start of a command
	stArrayLen          // in "*<n>\r\n"
	stBulkLen           // at or in "$<len>\r\n"
	stBulk              // in a bulk string and its CRLF
	stInline            // in the name of an inline command
	stInlineRest        // in the rest of an inline command's line
	stRaw               // not RESP we understand: forward as is
)

// Scanner events.
const (
	evNone    = iota
	evName    // the current command's name is complete (in name)
	evRelease // the held bytes are not the start of a named command
)

// scanner follows the commands a client sends, to find each command's
// start and name.
type scanner struct {
	st      int
	holding bool   // the current command's first bytes are held
	held    []byte // those bytes
	line    []byte // the length line being read
	elems   int    // elements left in the current array
	bulk    int    // bytes left in the current bulk string, CRLF included
	first   bool   // the bulk string being read is the command's name
	name    []byte
}

// step consumes a prefix of b (at least one byte) and reports how much and
// the event it ended on.
func (s *scanner) step(b []byte) (int, int) {
	switch s.st {
	case stCommand:
		s.holding, s.name, s.line = true, s.name[:0], s.line[:0]
		if b[0] == '*' {
			s.st = stArrayLen
			return 1, evNone
		}
		s.st = stInline
		return s.inline(b)
	case stInline:
		return s.inline(b)
	case stInlineRest:
		if i := indexByte(b, '\n'); i >= 0 {
			s.st = stCommand
			return i + 1, evNone
		}
		return len(b), evNone
	case stArrayLen, stBulkLen:
		return s.lengthLine(b)
	case stBulk:
		return s.bulkData(b)
	default: // stRaw
		return len(b), evNone
	}
}

// lengthLine reads the line of an array length ("*<n>") or of a bulk
// string's length ("$<n>"), after its first byte for an array.
func (s *scanner) lengthLine(b []byte) (int, int) {
	i := indexByte(b, '\n')
	if i < 0 {
		if s.line = append(s.line, b...); len(s.line) > 24 {
			return len(b), s.raw()
		}
		return len(b), evNone
	}
	if s.line = append(s.line, b[:i]...); len(s.line) > 24 {
		return i + 1, s.raw()
	}
	line := strings.TrimSuffix(string(s.line), "\r")
	s.line = s.line[:0]
	if s.st == stArrayLen {
		n, err := strconv.Atoi(line)
		if err != nil {
			return i + 1, s.raw()
		}
		if n <= 0 {
			s.st = stCommand
			return i + 1, evRelease
		}
		s.elems, s.first, s.st = n, true, stBulkLen
		return i + 1, evNone
	}
	if !strings.HasPrefix(line, "$") {
		return i + 1, s.raw()
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 {
		return i + 1, s.raw()
	}
	s.bulk, s.st = n+2, stBulk
	return i + 1, evNone
}

// bulkData reads the data of a bulk string and its CRLF, keeping the
// start of the command's first one, its name.
func (s *scanner) bulkData(b []byte) (int, int) {
	n := min(s.bulk, len(b))
	if s.first {
		// The name without its CRLF, at most 64 bytes of it.
		text := b[:min(n, max(s.bulk-2, 0))]
		if room := 64 - len(s.name); room > 0 {
			s.name = append(s.name, text[:min(len(text), room)]...)
		}
	}
	if s.bulk -= n; s.bulk > 0 {
		return n, evNone
	}
	s.elems--
	ev := evNone
	if s.first {
		s.first = false
		ev = evName
	}
	if s.elems == 0 {
		s.st = stCommand
	} else {
		s.st = stBulkLen
	}
	return n, ev
}

// inline reads the name of an inline command, up to a space or the end
// of the line.
func (s *scanner) inline(b []byte) (int, int) {
	for i, x := range b {
		switch x {
		case ' ', '\t', '\r', '\n':
			s.st = stInlineRest
			if x == '\n' {
				s.st = stCommand
			}
			return i + 1, evName
		}
		if len(s.name) < 64 {
			s.name = append(s.name, x)
		}
	}
	return len(b), evNone
}

// raw gives up parsing: everything is forwarded as is from now on.
func (s *scanner) raw() int {
	s.st = stRaw
	return evRelease
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
