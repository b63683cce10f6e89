package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Network is a fault-injecting TCP proxy in front of every broker's Raft
// listener. Brokers advertise their proxy's address as their raft_addr, so
// every Raft connection between two brokers passes through the proxy of the
// broker it was dialled to. The proxy reads the transport's hello (magic,
// version, lane, dialling broker's node id; sent in clear before the TLS
// handshake) to learn which pair of brokers a connection joins, so it can
// cut any pair, in both directions: a cut pair's live connections are
// closed and new ones refused until the cut heals.
//
// Limits: a cut is a clean close (RST/EOF) rather than silent packet loss, so
// a peer notices at once instead of after a timeout; the Kafka listeners and
// the control plane are never cut, only broker-to-broker Raft traffic.
type Network struct {
	log *slog.Logger
	// mu guards the fields below.
	mu      sync.Mutex
	cut     map[[2]int]bool // unordered pair of broker indexes (low, high)
	proxies []*proxy
	nodeIdx map[string]int // node id from the hello → broker index
	closed  bool
	cuts    int // connections closed or refused by a cut
}

type proxy struct {
	n      *Network
	to     int
	ln     net.Listener
	target string
	// guarded by n.mu
	links map[*link]struct{}
	wg    sync.WaitGroup
}

type link struct {
	n        *Network
	from, to int
	down     net.Conn
	up       net.Conn // guarded by n.mu; nil until dialled
}

// close closes both sides; closing twice is harmless. It takes n.mu, so
// holders of n.mu call it in a goroutine.
func (l *link) close() {
	_ = l.down.Close()
	l.n.mu.Lock()
	up := l.up
	l.n.mu.Unlock()
	if up != nil {
		_ = up.Close()
	}
}

// NewNetwork returns a network with no proxies and no cuts.
func NewNetwork(log *slog.Logger) *Network {
	return &Network{log: log, cut: map[[2]int]bool{}, nodeIdx: map[string]int{}}
}

// Listen starts the proxy of broker idx (whose Raft node id is nodeID) on a
// free loopback port, forwarding to target; it returns the proxy's address.
func (n *Network) Listen(idx int, nodeID string, target string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listen for the raft proxy of broker %d: %w", idx, err)
	}
	p := &proxy{n: n, to: idx, ln: ln, target: target, links: map[*link]struct{}{}}
	n.mu.Lock()
	n.proxies = append(n.proxies, p)
	n.nodeIdx[nodeID] = idx
	n.mu.Unlock()
	p.wg.Add(1)
	go p.accept()
	return ln.Addr().String(), nil
}

func pair(a, b int) [2]int {
	if a > b {
		a, b = b, a
	}
	return [2]int{a, b}
}

// Cut cuts the link between brokers a and b in both directions.
func (n *Network) Cut(a, b int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[pair(a, b)] = true
	for _, p := range n.proxies {
		for l := range p.links {
			if pair(l.from, l.to) == pair(a, b) {
				n.cuts++
				go l.close()
			}
		}
	}
}

// Isolate cuts broker a off from every other broker.
func (n *Network) Isolate(a int, brokers int) {
	for b := 0; b < brokers; b++ {
		if b != a {
			n.Cut(a, b)
		}
	}
}

// Heal restores every link.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut = map[[2]int]bool{}
}

// Cuts is the number of connections closed or refused by cuts so far.
func (n *Network) Cuts() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cuts
}

// Close stops every proxy and closes every connection through them.
func (n *Network) Close() {
	n.mu.Lock()
	n.closed = true
	ps := n.proxies
	for _, p := range ps {
		_ = p.ln.Close()
		for l := range p.links {
			go l.close()
		}
	}
	n.mu.Unlock()
	for _, p := range ps {
		p.wg.Wait()
	}
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

// helloMagic and helloVersion mirror the transport's connection hello,
// which it sends in clear before its TLS handshake so that this proxy can
// tell the pair a connection joins; the TLS session that follows (and the
// hello the transport repeats inside it) passes through untouched.
var helloMagic = [4]byte{'S', 'L', 'R', 'T'}

const helloVersion = 2

// readHello reads the transport's hello from r and returns its raw bytes
// and the dialling broker's node id.
func readHello(r *bufio.Reader) ([]byte, string, error) {
	raw := make([]byte, 6, 32)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, "", fmt.Errorf("read hello: %w", err)
	}
	if [4]byte(raw[:4]) != helloMagic || raw[4] != helloVersion {
		return nil, "", errors.New("read hello: not a raft transport hello")
	}
	n, err := binary.ReadUvarint(recorder{r, &raw})
	if err != nil {
		return nil, "", fmt.Errorf("read hello: %w", err)
	}
	if n > 64 {
		return nil, "", fmt.Errorf("read hello: node id of %d bytes", n)
	}
	id := make([]byte, n)
	if _, err := io.ReadFull(r, id); err != nil {
		return nil, "", fmt.Errorf("read hello: %w", err)
	}
	return append(raw, id...), string(id), nil
}

// recorder is a ByteReader that keeps the bytes it reads.
type recorder struct {
	r   *bufio.Reader
	raw *[]byte
}

func (r recorder) ReadByte() (byte, error) {
	b, err := r.r.ReadByte()
	if err == nil {
		*r.raw = append(*r.raw, b)
	}
	return b, err
}

func (p *proxy) serve(down net.Conn) {
	n := p.n
	_ = down.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(down)
	hello, from, err := readHello(br)
	if err != nil {
		n.log.Warn("raft proxy: bad hello", "to", p.to, "err", err)
		_ = down.Close()
		return
	}
	_ = down.SetReadDeadline(time.Time{})
	n.mu.Lock()
	fromIdx, known := n.nodeIdx[from]
	l := &link{n: n, from: fromIdx, to: p.to, down: down}
	if !known || n.closed || n.cut[pair(fromIdx, p.to)] {
		if known && !n.closed {
			n.cuts++
		}
		n.mu.Unlock()
		_ = down.Close()
		return
	}
	p.links[l] = struct{}{}
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(p.links, l)
		n.mu.Unlock()
		l.close()
	}()
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return // the broker is down: the dialler sees a closed connection
	}
	n.mu.Lock()
	l.up = up
	gone := n.cut[pair(fromIdx, p.to)] || n.closed
	n.mu.Unlock()
	if gone {
		_ = up.Close()
		return
	}
	if _, err := up.Write(hello); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); l.close(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(down, up); l.close(); done <- struct{}{} }()
	<-done
	<-done
}
