package fgatest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// OpenFGAVersion is the release of OpenFGA the comparisons are made with;
// scripts/ensure-openfga.sh installs it into bin/openfga.
const OpenFGAVersion = "v1.22.1"

// OpenFGABinary finds the openfga binary: $LATCH_OPENFGA, else the repository's
// bin/openfga, where `make openfga` (scripts/ensure-openfga.sh) puts it. It returns ""
// when there is none. Only those two places count, so that the comparisons run when
// asked for (`make fga-compare`) and not because some openfga is on the machine.
func OpenFGABinary(t testing.TB) string {
	if p := os.Getenv("LATCH_OPENFGA"); p != "" {
		return p
	}
	p := filepath.Join(ModuleRoot(t), "bin", "openfga")
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return p
	}
	return ""
}

// OpenFGA is a real OpenFGA server process, started for one test.
type OpenFGA struct {
	GRPCAddr, HTTPAddr string
	Client             openfgav1.OpenFGAServiceClient
}

// StartOpenFGA starts the real OpenFGA on loopback ports with extra flags (the memory
// datastore unless they name another), and stops it when the test ends. It skips the
// test when the binary is missing. ListObjects and ListUsers run without OpenFGA's
// deadlines and result caps, so that a loaded machine does not truncate an answer.
func StartOpenFGA(t testing.TB, extra ...string) *OpenFGA {
	t.Helper()
	bin := OpenFGABinary(t)
	if bin == "" {
		t.Skip("no bin/openfga: `make fga-compare` (or `make openfga`, or LATCH_OPENFGA=path) compares with the real OpenFGA")
	}
	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	args := append([]string{
		"run",
		"--grpc-addr", grpcAddr,
		"--http-addr", httpAddr,
		"--playground-enabled=false",
		"--metrics-enabled=false",
		"--log-level", "none",
		"--datastore-engine", "memory",
		"--listObjects-deadline", "0",
		"--listObjects-max-results", "0",
		"--listUsers-deadline", "0",
		"--listUsers-max-results", "0",
		"--request-timeout", "0",
	}, extra...)
	cmd := exec.Command(bin, args...)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial openfga: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	client := openfgav1.NewOpenFGAServiceClient(conn)
	waitReady(t, client, exited, &out)
	return &OpenFGA{GRPCAddr: grpcAddr, HTTPAddr: httpAddr, Client: client}
}

// waitReady polls ListStores until OpenFGA answers, for up to a minute: with anything
// but Unavailable (a server that wants a key it was not given answers too).
func waitReady(t testing.TB, client openfgav1.OpenFGAServiceClient, exited <-chan error, out *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := client.ListStores(ctx, &openfgav1.ListStoresRequest{})
		cancel()
		if status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded {
			return
		}
		select {
		case werr := <-exited:
			t.Fatalf("openfga exited before it served (%v): %s", werr, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("openfga did not serve within a minute: %v\n%s", err, out.String())
		}
	}
}

// freeAddr returns a loopback address with a port free at the time of asking; the child
// process binds it a moment later.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// syncBuffer collects a child process's output for failure messages.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer // guarded by mu
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fmt.Sprintf("%.4000s", b.buf.String())
}
