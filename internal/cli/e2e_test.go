package cli

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/latch-authz/latch/internal/server"
	"github.com/latch-authz/latch/internal/tlsconfig/tlstest"
)

const testSchema = `definition user {}

caveat min_level(level int, required int) {
  level >= required
}

definition document {
  relation viewer: user | user with min_level
  permission view = viewer
}
`

// startServer runs a server on loopback for the test and returns its gRPC address.
func startServer(t *testing.T, key string) string {
	t.Helper()
	return startServerWith(t, key, nil)
}

// startServerWith is startServer with a configuration changed by mutate.
func startServerWith(t *testing.T, key string, mutate func(*server.Config)) string {
	t.Helper()
	addr, _ := startServerAddrs(t, key, mutate)
	return addr
}

// startServerAddrs is startServerWith returning the gRPC and HTTP addresses.
func startServerAddrs(t *testing.T, key string, mutate func(*server.Config)) (grpcAddr, httpAddr string) {
	t.Helper()
	cfg := server.Config{
		GRPCAddr:        "127.0.0.1:0",
		HTTPAddr:        "-",
		PresharedKeys:   []string{key},
		DatastoreEngine: "memory",
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv.Addrs()
}

// step is one command of a scripted session and what it must print.
type step struct {
	args  []string
	stdin string
	code  int
	out   string // exact stdout; "" with outRE set means "match outRE"
	outRE string
	err   string // substring of stderr; "" means stderr must be empty
}

func runSteps(t *testing.T, env map[string]string, steps []step) {
	t.Helper()
	for _, s := range steps {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r := invocation{stdin: s.stdin, env: env}.run(ctx, s.args...)
		cancel()
		name := strings.Join(s.args, " ")
		if r.code != s.code {
			t.Errorf("latch %s: status %d, want %d (stdout %q, stderr %q)", name, r.code, s.code, r.out, r.err)
		}
		switch {
		case s.outRE != "":
			if !regexp.MustCompile(s.outRE).MatchString(r.out) {
				t.Errorf("latch %s: stdout %q does not match %s", name, r.out, s.outRE)
			}
		case r.out != s.out:
			t.Errorf("latch %s: stdout %q, want %q", name, r.out, s.out)
		}
		if (s.err == "" && r.err != "") || !strings.Contains(r.err, s.err) {
			t.Errorf("latch %s: stderr %q, want it to contain %q", name, r.err, s.err)
		}
	}
}

// token matches a printed ZedToken line.
const token = `^[A-Za-z0-9+/=]+\n$`

func TestClientCommandsAgainstServer(t *testing.T) {
	addr := startServer(t, "s3cret")
	env := map[string]string{"LATCH_ENDPOINT": addr, "LATCH_TOKEN": "s3cret"}
	runSteps(t, env, []step{
		{args: []string{"schema", "write", "-"}, stdin: testSchema, outRE: token},
		{args: []string{"schema", "read"}, outRE: `(?s)^caveat min_level\(level int, required int\).*permission view = viewer\n}\n\ndefinition user \{\}\n$`}, // SpiceDB's order: caveats, then definitions, by name
		{args: []string{"relationship", "create", "document:readme#viewer@user:alice", "document:readme#viewer@user:bob"}, outRE: token},
		{args: []string{"relationship", "create", "document:readme#viewer@user:alice"}, code: 1, err: "(AlreadyExists)"},
		{args: []string{"relationship", "touch", "-"}, stdin: "// from stdin\n\ndocument:plan#viewer@user:carol[min_level:{\"required\": 3}]\n", outRE: token},
		{args: []string{"check", "document:readme#view@user:alice"}, out: "true\n"},
		{args: []string{"check", "document:readme#view@user:dave"}, out: "false\n"},
		{args: []string{"check", "document:readme#view@user:dave", "--error-on-no-permission"}, code: 1, out: "false\n"},
		{args: []string{"check", "document:plan#view@user:carol"}, out: "caveated (missing: level)\n"},
		{args: []string{"check", "document:plan#view@user:carol", "--context", `{"level": 5}`}, out: "true\n"},
		{args: []string{"check", `document:plan#view@user:carol with {"level": 1}`, "--consistency", "min"}, out: "false\n"},
		{args: []string{"check", `document:plan#view@user:carol with {"level": 1}`, "--context", "{}"}, code: 1, err: "caveat context given twice"},
		{args: []string{"relationship", "read", "document:readme#viewer"}, out: "document:readme#viewer@user:alice\ndocument:readme#viewer@user:bob\n"},
		{args: []string{"relationship", "delete", "document:readme#viewer@user:bob"}, outRE: token},
		{args: []string{"relationship", "read", "document@user"}, out: "document:plan#viewer@user:carol[min_level:{\"required\":3}]\ndocument:readme#viewer@user:alice\n"},
		{args: []string{"check", "document:readme#view@user:bob"}, out: "false\n"},
		{args: []string{"check", "document:readme#nope@user:bob"}, code: 1, err: "checking permission: "},
		{args: []string{"relationship", "create", "document:readme#viewer"}, code: 1, err: `relationship "document:readme#viewer"`},
	})
}

// TestClientOverTLS: --tls with --ca-path reaches a TLS server; without the CA the
// certificate is refused, and plaintext is refused by the server.
func TestClientOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir)
	cert, key := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	ca.Issue(t, cert, key)
	addr := startServerWith(t, "k", func(c *server.Config) { c.GRPCTLSCertPath, c.GRPCTLSKeyPath = cert, key })
	env := map[string]string{"LATCH_ENDPOINT": addr, "LATCH_TOKEN": "k"}
	runSteps(t, env, []step{
		{args: []string{"schema", "write", "-", "--tls", "--ca-path", ca.Path}, stdin: testSchema, outRE: token},
		{args: []string{"check", "document:readme#view@user:alice", "--insecure=false", "--ca-path", ca.Path}, out: "false\n"},
		{args: []string{"check", "document:readme#view@user:alice", "--tls"}, code: 1, err: "certificate"},
		{args: []string{"check", "document:readme#view@user:alice"}, code: 1, err: "checking permission: "},
		{args: []string{"check", "document:readme#view@user:alice", "--ca-path", ca.Path}, code: 1, err: "--ca-path needs --tls"},
	})
}

func TestReadAtWriteToken(t *testing.T) {
	addr := startServer(t, "k")
	env := map[string]string{"LATCH_ENDPOINT": addr, "LATCH_TOKEN": "k"}
	runSteps(t, env, []step{{args: []string{"schema", "write", "-"}, stdin: testSchema, outRE: token}})
	r := invocation{env: env}.run(context.Background(), "relationship", "create", "document:a#viewer@user:x")
	if r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	tok := strings.TrimSpace(r.out)
	runSteps(t, env, []step{
		{args: []string{"check", "document:a#view@user:x", "--consistency", "at-least:" + tok}, out: "true\n"},
		{args: []string{"relationship", "read", "document:a", "--consistency", "exact:" + tok}, out: "document:a#viewer@user:x\n"},
		{args: []string{"check", "document:a#view@user:x", "--consistency", "exact:bm9wZQ=="}, code: 1, err: "checking permission: "},
	})
}

func TestClientErrorsAreOneClearLine(t *testing.T) {
	addr := startServer(t, "right")
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{
			"no token",
			map[string]string{"LATCH_ENDPOINT": addr},
			[]string{"schema", "read"},
			[]string{"reading schema: ", "(Unauthenticated)", "--token or LATCH_TOKEN"},
		},
		{
			"wrong token flag beats env",
			map[string]string{"LATCH_ENDPOINT": addr, "LATCH_TOKEN": "right"},
			[]string{"schema", "read", "--token", "wrong"},
			[]string{"(PermissionDenied)", "--token or LATCH_TOKEN"},
		},
		{
			"nobody listening", nil,
			[]string{"check", "doc:1#view@user:2", "--endpoint", "127.0.0.1:1", "--token", "x"},
			[]string{"checking permission: ", "(Unavailable)", "is a latch server running at 127.0.0.1:1?"},
		},
		{
			"bad relationship, named once",
			map[string]string{"LATCH_ENDPOINT": addr, "LATCH_TOKEN": "right"},
			[]string{"relationship", "create", "document:a#viewer@"},
			[]string{`latch: relationship "document:a#viewer@": subject`},
		},
		{
			"contradicting tls flags", nil,
			[]string{"schema", "read", "--insecure", "--tls"},
			[]string{"--insecure and --tls contradict each other"},
		},
		{
			"bad consistency",
			map[string]string{"LATCH_ENDPOINT": addr, "LATCH_TOKEN": "right"},
			[]string{"check", "doc:1#view@user:2", "--consistency", "soon"},
			[]string{`--consistency "soon"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := invocation{env: tc.env}.run(context.Background(), tc.args...)
			if r.code != 1 || strings.Count(r.err, "\n") != 1 || !strings.HasPrefix(r.err, "latch: ") {
				t.Fatalf("status %d, stderr %q; want status 1 and one line", r.code, r.err)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.err, w) {
					t.Errorf("stderr %q does not contain %q", r.err, w)
				}
			}
		})
	}
}

// TestServe runs `latch serve` itself: it prints its addresses and a generated key,
// the client commands and the HTTP gateway accept that key, and it stops cleanly
// when its context ends (as on SIGINT).
func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	dataDir := t.TempDir()
	go func() {
		done <- Main(ctx, []string{
			"serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--data-dir", dataDir, "--metrics-addr", "127.0.0.1:0",
			"--log-level", "debug", "--log-format", "json",
		},
			Env{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	}()
	// --log-format json: the startup lines are JSON records too.
	m := waitFor(t, &out, regexp.MustCompile(`"key":"([^"]+)","endpoint":"([^"]+)"`))
	key, grpcAddr := m[1], m[2]
	httpAddr := waitFor(t, &out, regexp.MustCompile(`gateway listening on (http://[^"\s]+)`))[1]

	env := map[string]string{"LATCH_ENDPOINT": grpcAddr, "LATCH_TOKEN": key}
	runSteps(t, env, []step{
		{args: []string{"schema", "write", "-"}, stdin: testSchema, outRE: token},
		{args: []string{"relationship", "create", "document:readme#viewer@user:alice"}, outRE: token},
	})
	body := `{"consistency": {"fullyConsistent": true}, "resource": {"objectType": "document", "objectId": "readme"}, "permission": "view", "subject": {"object": {"objectType": "user", "objectId": "alice"}}}`
	req, err := http.NewRequest(http.MethodPost, httpAddr+"/v1/permissions/check", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Request-Id", "trace-me-42")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), "PERMISSIONSHIP_HAS_PERMISSION") {
		t.Errorf("gateway check: %s %s", resp.Status, got)
	}
	waitFor(t, &errOut, regexp.MustCompile(`"msg":"rpc","request_id":"trace-me-42","method":"/authzed.api.v1.PermissionsService/CheckPermission","code":"OK"`))

	cancel()
	select {
	case code := <-done:
		if code != 0 || !strings.HasSuffix(out.String(), `"msg":"stopped"}`+"\n") {
			t.Errorf("serve exited %d; stdout %q, stderr %q", code, out.String(), errOut.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop after its context was cancelled")
	}
}

func TestServeRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--grpc-addr", "0.0.0.0:0", "--http-addr", "-"}, "not a loopback address"},
		{[]string{"serve", "--datastore-engine", "cassandra", "--grpc-addr", "127.0.0.1:0", "--http-addr", "-"}, `datastore engine "cassandra"`},
		{[]string{"serve", "--dispatch-max-depth", "-1", "--grpc-addr", "127.0.0.1:0", "--http-addr", "-"}, "max depth"},
		{
			[]string{
				"serve", "--grpc-preshared-key", "k", "--datastore-engine", "postgres", "--datastore-conn-uri", "postgres://x", "--dispatch-cluster-enabled",
				"--dispatch-cluster-addr", "0.0.0.0:50053", "--dispatch-upstream-addr", "static:///a:1", "--grpc-addr", "127.0.0.1:0", "--http-addr", "-",
			},
			`--dispatch-cluster-addr "0.0.0.0:50053" is not a loopback address and the dispatch service has no TLS`,
		},
		{[]string{"serve", "--otel-provider", "jaeger", "--grpc-addr", "127.0.0.1:0", "--http-addr", "-"}, `--otel-provider "jaeger": expected none, otlpgrpc or otlphttp`},
		{[]string{"serve", "--otel-provider", "otlpgrpc", "--otel-sample-ratio", "2", "--grpc-addr", "127.0.0.1:0", "--http-addr", "-"}, "--otel-sample-ratio 2"},
		{[]string{"serve", "--materialize", "document#view", "--grpc-addr", "127.0.0.1:0", "--http-addr", "-"}, "--materialize: materialize configuration entry \"document#view\": no `@` before the subject type"},
		{[]string{"serve", "--materialize-file", filepath.Join(t.TempDir(), "none"), "--grpc-addr", "127.0.0.1:0", "--http-addr", "-"}, "--materialize-file: open"},
	} {
		r := latch(t, tc.args...)
		if r.code != 1 || !strings.Contains(r.err, tc.want) {
			t.Errorf("latch %v: status %d, stderr %q; want status 1 mentioning %q", tc.args, r.code, r.err, tc.want)
		}
	}
}

// waitFor waits until re matches what w has printed and returns the submatches.
func waitFor(t *testing.T, w *syncBuffer, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(w.String()); m != nil {
			return m
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %s in output %q", re, w.String())
	return nil
}

// TestUnavailableSaysWhy: a call that finds no gRPC server says which mistake it is:
// the HTTP gateway's port, a TLS port without --tls, --tls on a plaintext port; and a
// server's own UNAVAILABLE (its datastore is down) is not blamed on a missing server.
func TestUnavailableSaysWhy(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir)
	cert, key := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	ca.Issue(t, cert, key)
	tlsAddr := startServerWith(t, "k", func(c *server.Config) { c.GRPCTLSCertPath, c.GRPCTLSKeyPath = cert, key })
	plainAddr, httpAddr := startServerAddrs(t, "k", func(c *server.Config) { c.HTTPAddr = "127.0.0.1:0" })
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"gateway port", []string{"--endpoint", httpAddr}, "does not speak plaintext gRPC: if it serves TLS, add --tls; if it is latch's HTTP gateway port"},
		{"TLS port in plaintext", []string{"--endpoint", tlsAddr}, "add --tls"},
		{"--tls on a plaintext port", []string{"--endpoint", plainAddr, "--tls"}, "speaks plaintext: connect without --tls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := invocation{env: map[string]string{"LATCH_TOKEN": "k"}}.run(context.Background(), append([]string{"schema", "read"}, tc.args...)...)
			if r.code != 1 || !strings.Contains(r.err, tc.want) || strings.Contains(r.err, "is a latch server running") {
				t.Fatalf("status %d, stderr %q; want status 1 and %q", r.code, r.err, tc.want)
			}
		})
	}
	outage := &rpcError{op: "checking permission", endpoint: plainAddr, code: codes.Unavailable, msg: "the datastore is unavailable: connection refused"}
	if h := outage.hint(); h != "" {
		t.Errorf("a server's own UNAVAILABLE got the hint %q", h)
	}
}
