package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ServeEmpty serves the empty server (startEmpty) and, beside it, Prometheus metrics of
// this process (its CPU) over HTTP, both on 127.0.0.1. It writes one line to out,
// "GRPC_ADDR METRICS_URL", and serves until in ends (the process that started it closed
// its end, or exited) or ctx does. It is `latch bench empty-server`, which
// StartEmptyProcess runs.
func ServeEmpty(ctx context.Context, in io.Reader, out io.Writer) error {
	e, stop, err := startEmpty()
	if err != nil {
		return err
	}
	defer stop()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listening for the empty server's metrics: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(lis) }()
	defer hs.Close()
	if _, err := fmt.Fprintf(out, "%s http://%s/metrics\n", e.Addr, lis.Addr()); err != nil {
		return err
	}
	ended := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, in)
		close(ended)
	}()
	select {
	case <-ended:
	case <-ctx.Done():
	}
	return nil
}

// StartEmptyProcess runs the empty server in a process of its own, exe (the latch
// binary) as `latch bench empty-server`, so that it is measured as a latch server is:
// over loopback from another process, its CPU apart from the generator's. An empty
// server inside the generator's process answers without waking another process for
// each call, which a server of its own cannot avoid, and so sets a ceiling no server
// can reach. It returns the server's endpoint, the URL of its Prometheus metrics, and
// stop, which ends the process and waits for it.
func StartEmptyProcess(exe string) (e Endpoint, metricsURL string, stop func(), err error) {
	cmd := exec.Command(exe, "bench", "empty-server")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return e, "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return e, "", nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return e, "", nil, fmt.Errorf("starting the empty server (%s bench empty-server): %w", exe, err)
	}
	stop = func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, url, ok := strings.Cut(strings.TrimSpace(line), " ")
	if err != nil || !ok {
		stop()
		return e, "", nil, fmt.Errorf("the empty server (%s bench empty-server) did not start: it wrote %q (%v), and on stderr %q", exe, line, err, strings.TrimSpace(stderr.String()))
	}
	return Endpoint{Addr: addr}, url, stop, nil
}
