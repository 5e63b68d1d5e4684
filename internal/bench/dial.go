package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/latch-authz/latch/internal/server"
)

// Endpoint says how to reach a server.
type Endpoint struct {
	Addr  string
	Token string
	TLS   bool
	// CACert is a PEM file of authorities to trust with TLS instead of the system's.
	CACert string
}

// Dial opens n connections to e. Several connections spread the load over more HTTP/2
// streams' worth of flow control and more server goroutines reading sockets.
func Dial(e Endpoint, n int) ([]*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if e.TLS {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if e.CACert != "" {
			pem, err := os.ReadFile(e.CACert)
			if err != nil {
				return nil, fmt.Errorf("reading the CA certificate: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%s holds no PEM certificate", e.CACert)
			}
		}
		creds = credentials.NewTLS(cfg)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if e.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: e.Token, secure: e.TLS}))
	}
	var conns []*grpc.ClientConn
	for range max(n, 1) {
		c, err := grpc.NewClient(e.Addr, opts...)
		if err != nil {
			CloseAll(conns)
			return nil, fmt.Errorf("connecting to %s: %w", e.Addr, err)
		}
		conns = append(conns, c)
	}
	return conns, nil
}

// DialEach opens connections to every endpoint of es, the same number to each: n in
// all, rounded up to a multiple of len(es) so that no endpoint gets more than another.
// They are interleaved (es[0], es[1], …, es[0], es[1], …), so that taking them in turn,
// as each worker does, visits every endpoint equally often, and the first is es[0]'s.
func DialEach(es []Endpoint, n int) ([]*grpc.ClientConn, error) {
	if len(es) == 0 {
		return nil, errors.New("no endpoint to connect to")
	}
	per := (max(n, 1) + len(es) - 1) / len(es)
	conns := make([]*grpc.ClientConn, per*len(es))
	var opened []*grpc.ClientConn
	for j, e := range es {
		cs, err := Dial(e, per)
		if err != nil {
			CloseAll(opened)
			return nil, err
		}
		opened = append(opened, cs...)
		for i, c := range cs {
			conns[i*len(es)+j] = c
		}
	}
	return conns, nil
}

// rotor sends each call over the next of its connections in turn, starting at a
// worker's own offset so that workers do not move in step. One worker's goroutine
// uses it, so it needs no lock.
type rotor struct {
	conns []Conn
	next  int
}

func newRotor(conns []Conn, offset int) *rotor {
	return &rotor{conns: conns, next: offset % len(conns)}
}

func (r *rotor) pick() Conn {
	c := r.conns[r.next]
	r.next = (r.next + 1) % len(r.conns)
	return c
}

func (r *rotor) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return r.pick().Invoke(ctx, method, args, reply, opts...)
}

func (r *rotor) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return r.pick().NewStream(ctx, desc, method, opts...)
}

// CloseAll closes conns.
func CloseAll(conns []*grpc.ClientConn) {
	for _, c := range conns {
		_ = c.Close()
	}
}

// Conns turns connections into what Run takes.
func Conns(cs []*grpc.ClientConn) []Conn {
	out := make([]Conn, len(cs))
	for i, c := range cs {
		out[i] = c
	}
	return out
}

// bearer sends the preshared key; plaintext is allowed because loopback benchmarks
// are the common case, as SpiceDB's own tools allow.
type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }

// InProcessKey is the preshared key of servers StartLatch starts.
const InProcessKey = "latch-bench-in-process"

// StartLatch starts a latch server with the memory datastore on 127.0.0.1:0 inside
// this process. stop shuts it down and waits for it.
func StartLatch(ctx context.Context) (e Endpoint, stop func(), err error) {
	srv, err := server.New(server.Config{
		GRPCAddr: "127.0.0.1:0", HTTPAddr: "-", PresharedKeys: []string{InProcessKey},
		DatastoreEngine: "memory", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return e, nil, fmt.Errorf("starting an in-process latch: %w", err)
	}
	addr, _ := srv.Addrs()
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ctx)
	}()
	return Endpoint{Addr: addr, Token: InProcessKey}, func() { cancel(); <-done }, nil
}

// emptyServer answers every CheckPermission with the same constant: the ceiling of
// what gRPC on this machine can carry, against which latch's rate is read.
type emptyServer struct {
	v1.UnimplementedPermissionsServiceServer
}

var constantCheck = &v1.CheckPermissionResponse{
	CheckedAt:      &v1.ZedToken{Token: "empty"},
	Permissionship: v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION,
}

func (emptyServer) CheckPermission(context.Context, *v1.CheckPermissionRequest) (*v1.CheckPermissionResponse, error) {
	return constantCheck, nil
}

// startEmpty starts an empty gRPC server (CheckPermission returns a constant, every
// other method is unimplemented) on 127.0.0.1:0.
func startEmpty() (e Endpoint, stop func(), err error) {
	return serveLoopback(emptyServer{})
}

// serveLoopback serves svc alone on 127.0.0.1:0, without authentication.
func serveLoopback(svc v1.PermissionsServiceServer) (e Endpoint, stop func(), err error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return e, nil, fmt.Errorf("listening for the empty server: %w", err)
	}
	g := grpc.NewServer()
	v1.RegisterPermissionsServiceServer(g, svc)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(lis)
	}()
	return Endpoint{Addr: lis.Addr().String()}, func() { g.Stop(); <-done }, nil
}
