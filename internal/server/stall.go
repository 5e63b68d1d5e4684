package server

import (
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A streaming call holds an admission slot while it runs, and gRPC's flow control
// blocks its sends once a client stops reading: such a call would hold its slot for as
// long as the connection lives, and two of them took every expensive slot from every
// other client. A stream whose send makes no progress for the stall timeout is ended
// with a clear error and its slot freed at once, as Watch is (watch.go).

// stallGuard is an admitted stream whose sends go through a goroutine of its own, so
// that a send blocked on the client can be given up on. Sends stay synchronous: the
// handler waits for each one, as gRPC's SendMsg contract wants. All its methods run
// on the call's goroutine (gRPC allows one sender at a time).
type stallGuard struct {
	grpc.ServerStream
	timeout time.Duration
	release func() // frees the call's admission slot

	sends   chan any   // to the sender; nil until the first send
	results chan error // from the sender; room for the result nobody waits for
	timer   *time.Timer
	stalled bool // the client stopped reading: the slot is freed, the call ends
}

func newStallGuard(ss grpc.ServerStream, timeout time.Duration, release func()) *stallGuard {
	return &stallGuard{ServerStream: ss, timeout: timeout, release: release}
}

func (g *stallGuard) SendMsg(m any) error {
	if g.stalled {
		return g.stallError()
	}
	if g.sends == nil {
		g.sends, g.results = make(chan any), make(chan error, 1)
		g.timer = time.NewTimer(g.timeout)
		go g.sender()
	} else {
		g.timer.Reset(g.timeout)
	}
	g.sends <- m
	select {
	case err := <-g.results:
		g.timer.Stop()
		return err
	case <-g.timer.C:
		// The send stays blocked until the call ends and gRPC closes the stream.
		g.stalled = true
		g.release()
		return g.stallError()
	}
}

// sender sends each message on the stream until finish.
func (g *stallGuard) sender() {
	for m := range g.sends {
		g.results <- g.ServerStream.SendMsg(m)
	}
}

// finish, deferred when the call ends, ends the sender (a send blocked on the client
// ends with the call's stream) and frees the slot unless a stall already did.
func (g *stallGuard) finish() {
	if g.sends != nil {
		close(g.sends)
		g.timer.Stop()
	}
	if !g.stalled {
		g.release()
	}
}

func (g *stallGuard) stallError() error {
	return status.Error(codes.ResourceExhausted, fmt.Sprintf(
		"stream ended: the client took no response for %v, so its admission slot was freed for other calls; read responses as they arrive (or page with optional_limit and a cursor) and retry", g.timeout))
}
