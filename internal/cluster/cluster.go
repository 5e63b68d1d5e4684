// Package cluster makes latch nodes one cluster: it knows the members (a static list
// or every address DNS gives for a name, re-resolved), routes each subproblem to the
// member that owns it by rendezvous hashing, carries subproblems over an internal
// gRPC service with its own key, and keeps a dead, partitioned or slow member from
// costing more than latency: failed dispatches are answered locally, a member failing
// again and again is marked down, probed with a health call and, once it answers,
// given a growing share of its subproblems, and a slow answer is hedged by a local one
// (a slow member is not marked down: losing races is not failing). What a subproblem is and how it is answered is the engine's.
package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/latch-authz/latch/internal/engine"
)

// Defaults, SpiceDB's where it has one.
const (
	DefaultConcurrencyLimit = 50
	// DefaultRefreshInterval is how often a dns:/// target is resolved again.
	DefaultRefreshInterval = 5 * time.Second
	// DefaultTimeout is SpiceDB's --dispatch-upstream-timeout.
	DefaultTimeout = time.Minute
)

// Config describes this node's place in a cluster.
type Config struct {
	// Addr is this node's dispatch address (HOST:PORT). The node finds itself among the
	// members by it: the same host and port, or, with no host or an unspecified one
	// (":50053", "0.0.0.0:50053"), the same port on an address of this machine.
	Addr string
	// Upstream names the members: "static:///h1:p1,h2:p2" or "dns:///name:port" (every
	// A and AAAA record of name, resolved again every RefreshInterval).
	Upstream string
	// PresharedKey is the bearer token dispatches carry and the service requires.
	PresharedKey string
	// ConcurrencyLimit bounds the dispatches in flight to one member; past it, a
	// subproblem is answered locally (0: DefaultConcurrencyLimit).
	ConcurrencyLimit int
	// RefreshInterval is how often a dns:/// target is resolved (0: the default).
	RefreshInterval time.Duration
	// Timeout bounds one dispatch; past it the dispatch has failed and is answered
	// locally (0: DefaultTimeout).
	Timeout time.Duration
	// ServerTLS, if not nil, serves the dispatch service over TLS; ClientTLS, if not
	// nil, dials the peers over TLS, verifying each against the name it was found by
	// (the dns:/// name, or a static member's host).
	ServerTLS, ClientTLS *tls.Config
	// LookupHost resolves a name to addresses (nil: the system resolver).
	LookupHost func(ctx context.Context, host string) ([]string, error)
	// WarmUp is how long a peer that was marked down and came back takes to be given
	// its whole share of subproblems (0: DefaultWarmUp).
	WarmUp time.Duration
	// Registerer receives the cluster's metrics (nil: none are registered).
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Cluster is this node's view of the cluster: an engine.Dispatcher.
type Cluster struct {
	cfg     Config
	self    selfAddr
	members atomic.Pointer[ring]
	metrics *metrics
	classes sync.Map // classKey → *class
	stop    context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex // guards peers
	peers   map[string]*peer
	// dnsName is the name of a dns:/// target ("" for a static list): peers found by it
	// present certificates for it.
	dnsName string
}

// New joins the cluster cfg describes: it resolves the members once (a static list
// must name this node), then, for dns:///, keeps resolving in the background until
// Close.
func New(cfg Config) (*Cluster, error) {
	if cfg.ConcurrencyLimit <= 0 {
		cfg.ConcurrencyLimit = DefaultConcurrencyLimit
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.WarmUp <= 0 {
		cfg.WarmUp = DefaultWarmUp
	}
	if cfg.LookupHost == nil {
		cfg.LookupHost = net.DefaultResolver.LookupHost
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	self, err := parseSelf(cfg.Addr)
	if err != nil {
		return nil, err
	}
	scheme, rest, ok := strings.Cut(cfg.Upstream, ":///")
	if !ok || rest == "" || (scheme != "static" && scheme != "dns") {
		return nil, fmt.Errorf("--dispatch-upstream-addr %q: want static:///host:port,host:port,... or dns:///name:port", cfg.Upstream)
	}
	c := &Cluster{cfg: cfg, self: self, peers: map[string]*peer{}, metrics: newMetrics(cfg.Registerer), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if scheme == "static" {
		addrs := strings.Split(rest, ",")
		for _, a := range addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, fmt.Errorf("--dispatch-upstream-addr: member %q: %v", a, err)
			}
		}
		c.setMembers(ctx, addrs)
		if !c.members.Load().hasSelf {
			c.Close()
			return nil, fmt.Errorf("--dispatch-cluster-addr %s is not among the members of --dispatch-upstream-addr %s: a node must find itself in a static list", cfg.Addr, cfg.Upstream)
		}
		close(c.done)
		c.stop = func() {}
		return c, nil
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return nil, fmt.Errorf("--dispatch-upstream-addr %q: %v", cfg.Upstream, err)
	}
	c.dnsName = host
	if err := c.resolve(ctx, host, port); err != nil {
		// A headless service has no records until its first pod is ready: start with no
		// peers and keep resolving.
		cfg.Logger.Warn("cluster members not resolved yet; retrying", "upstream", cfg.Upstream, "error", err)
	}
	bg, stop := context.WithCancel(context.Background())
	c.stop = stop
	go c.refresh(bg, host, port)
	return c, nil
}

// Close stops resolving and closes the connections to the other members.
func (c *Cluster) Close() {
	if c.stop != nil {
		c.stop()
		<-c.done
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for addr, p := range c.peers {
		p.close()
		delete(c.peers, addr)
	}
}

// Owner is engine.Dispatcher's: the member owning h, nil when it is this node or when
// the owner is marked down (this node answers for it until the owner is back).
func (c *Cluster) Owner(h uint64) engine.Node {
	r := c.members.Load()
	p := r.owner(h)
	if p == nil || !p.available() {
		c.metrics.local.Inc()
		return nil
	}
	c.metrics.remote.Inc()
	return p
}

// class returns the hedging class of k's subproblems.
func (c *Cluster) class(k classKey) *class {
	if v, ok := c.classes.Load(k); ok {
		return v.(*class)
	}
	v, _ := c.classes.LoadOrStore(k, &class{p95: map[*peer]time.Duration{}})
	return v.(*class)
}

// Members returns the member addresses, this node's included, sorted.
func (c *Cluster) Members() []string {
	r := c.members.Load()
	out := make([]string, 0, len(r.members))
	for _, m := range r.members {
		out = append(out, m.addr)
	}
	return out
}

func (c *Cluster) refresh(ctx context.Context, host, port string) {
	defer close(c.done)
	t := time.NewTicker(c.cfg.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, c.cfg.RefreshInterval)
			if err := c.resolve(rctx, host, port); err != nil && ctx.Err() == nil {
				c.cfg.Logger.Warn("resolving cluster members", "upstream", c.cfg.Upstream, "error", err)
			}
			cancel()
		}
	}
}

// resolve sets the members to every address host has, at port. A failed lookup keeps
// the members as they were: a resolver blip must not shrink the cluster.
func (c *Cluster) resolve(ctx context.Context, host, port string) error {
	ips, err := c.cfg.LookupHost(ctx, host)
	if err != nil {
		return err
	}
	if len(ips) == 0 {
		return errors.New("no addresses")
	}
	addrs := make([]string, 0, len(ips))
	for _, ip := range ips {
		addrs = append(addrs, net.JoinHostPort(ip, port))
	}
	c.setMembers(ctx, addrs)
	return nil
}

// setMembers makes addrs the members: connections to new peers are opened (lazily, by
// gRPC), those to members that left are closed.
func (c *Cluster) setMembers(ctx context.Context, addrs []string) {
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	if old := c.members.Load(); old != nil && slices.Equal(old.addrs, addrs) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := &ring{addrs: addrs}
	keep := map[string]bool{}
	for _, a := range addrs {
		m := member{addr: a, hash: memberHash(a)}
		if c.self.is(ctx, a, c.cfg.LookupHost) {
			r.hasSelf = true
		} else {
			p := c.peers[a]
			if p == nil {
				var err error
				if p, err = c.dial(a); err != nil {
					c.cfg.Logger.Warn("cluster member left out", "member", a, "error", err)
					continue
				}
				c.peers[a] = p
			}
			m.peer = p
			keep[a] = true
		}
		r.members = append(r.members, m)
	}
	for a, p := range c.peers {
		if !keep[a] {
			p.close()
			delete(c.peers, a)
		}
	}
	c.members.Store(r)
	c.cfg.Logger.Info("cluster members", "members", addrs, "self_found", r.hasSelf)
}

func (c *Cluster) dial(addr string) (*peer, error) {
	creds := insecure.NewCredentials()
	if c.cfg.ClientTLS != nil {
		cfg := c.cfg.ClientTLS.Clone()
		if cfg.ServerName, _, _ = net.SplitHostPort(addr); c.dnsName != "" {
			cfg.ServerName = c.dnsName
		}
		creds = credentials.NewTLS(cfg)
	}
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(bearer{key: c.cfg.PresharedKey, secure: c.cfg.ClientTLS != nil}),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(codec{})),
		// Pings find a peer that vanished without closing its connections (a partition,
		// a powered-off machine) in seconds, so its dispatches fail and it is marked down.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: keepaliveTimeout}),
		// gRPC's own reconnection backoff grows to two minutes: a peer restarted after a
		// long outage would wait that long to be dialed again, whatever the probes say.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: probeFirst, Multiplier: 1.6, Jitter: 0.2, MaxDelay: probeMax},
			MinConnectTimeout: probeTimeout,
		}),
	)
	if err != nil {
		return nil, err
	}
	return newPeer(c, addr, conn), nil
}

// keepaliveTime is how long a connection to a peer may be idle before it is pinged;
// keepaliveTimeout how long a ping may go unanswered before the connection is dropped.
const (
	keepaliveTime    = 10 * time.Second
	keepaliveTimeout = 5 * time.Second
)

// bearer sends the cluster's preshared key with every dispatch.
type bearer struct {
	key    string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.key}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }

// ring is one membership: rendezvous hashing gives each subproblem the member whose
// hash mixed with the subproblem's scores highest, so a member joining or leaving moves
// only the subproblems it gains or loses.
type ring struct {
	addrs   []string
	members []member
	hasSelf bool
}

type member struct {
	addr string
	hash uint64
	peer *peer // nil: this node
}

// owner returns the peer owning h, or nil when this node does (or there are no members).
func (r *ring) owner(h uint64) *peer {
	var best *member
	var bestScore uint64
	for i := range r.members {
		m := &r.members[i]
		if s := mix(h ^ m.hash); best == nil || s > bestScore {
			best, bestScore = m, s
		}
	}
	if best == nil {
		return nil
	}
	return best.peer
}

// memberHash is FNV-1a of a member's address: every node computes the same.
func memberHash(addr string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(addr); i++ {
		h = (h ^ uint64(addr[i])) * 1099511628211
	}
	return h
}

// mix is a 64-bit finalizer (splitmix64's): it spreads h ^ member over all bits, so
// every member wins an equal share of subproblems.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// selfAddr is this node's dispatch address, to find itself among the members.
type selfAddr struct {
	host string // "" when unspecified
	port string
}

func parseSelf(addr string) (selfAddr, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return selfAddr{}, fmt.Errorf("--dispatch-cluster-addr %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = ""
	}
	return selfAddr{host: host, port: port}, nil
}

// is reports whether member addr is this node: the same port, and the same host, or
// with no host of its own, a host that is (or resolves to) an address of this machine.
func (s selfAddr) is(ctx context.Context, addr string, lookup func(context.Context, string) ([]string, error)) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port != s.port {
		return false
	}
	if s.host != "" {
		return host == s.host || sameIP(host, s.host)
	}
	ips := []string{host}
	if net.ParseIP(host) == nil {
		if ips, err = lookup(ctx, host); err != nil {
			return false
		}
	}
	local, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, ip := range ips {
		for _, a := range local {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(net.ParseIP(ip)) {
				return true
			}
		}
	}
	return false
}

func sameIP(a, b string) bool {
	x, y := net.ParseIP(a), net.ParseIP(b)
	return x != nil && y != nil && x.Equal(y)
}
