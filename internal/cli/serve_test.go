package cli

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/tlsconfig/tlstest"
)

// TestJSONLogFormatIsEveryLine: with --log-format json every line latch serve writes is
// a JSON record: the startup lines on stdout, net/http's TLS handshake errors (which
// net/http writes through a logger of its own), and the line saying it stopped.
func TestJSONLogFormatIsEveryLine(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	tlstest.NewCA(t, dir).Issue(t, cert, key)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{
			"serve", "--log-format", "json", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
			"--http-tls-cert-path", cert, "--http-tls-key-path", key, "--metrics-addr", "-", "--datastore-engine", "memory",
		}, Env{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	}()
	m := waitFor(t, &out, regexp.MustCompile(`"msg":"HTTP/JSON gateway listening on https://([0-9.:]+)"`))
	waitFor(t, &out, regexp.MustCompile(`"msg":"no --grpc-preshared-key given; generated this key for this run"`))
	// A client that hangs up mid-handshake: net/http logs "TLS handshake error".
	c, err := net.Dial("tcp", m[1])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte{0x16, 0x03, 0x01, 0x00, 0x20, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitFor(t, &errOut, regexp.MustCompile(`"msg":"http: TLS handshake error"`))
	cancel()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop after its context was cancelled")
	}
	for name, text := range map[string]string{"stdout": out.String(), "stderr": errOut.String()} {
		for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["msg"] == nil {
				t.Errorf("%s line %q is not a JSON record", name, line)
			}
		}
	}
	if !strings.Contains(out.String(), `"msg":"stopped"`) {
		t.Errorf("no stopped record on stdout: %s", out.String())
	}
}
