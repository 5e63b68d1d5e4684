package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/latch-authz/latch/internal/server"
)

// TestServeHelpGroups: every visible flag of latch serve is in exactly one group of its
// help, and the help shows each group's title and the examples.
func TestServeHelpGroups(t *testing.T) {
	cmd := newServeCommand(Env{Getenv: func(string) string { return "" }})
	seen := map[string]string{}
	for _, g := range serveFlagGroups {
		for _, name := range g.flags {
			if other, dup := seen[name]; dup {
				t.Errorf("--%s is in both %q and %q", name, other, g.title)
			}
			seen[name] = g.title
			if cmd.Flags().Lookup(name) == nil {
				t.Errorf("group %q names --%s, which latch serve does not have", g.title, name)
			}
		}
	}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if _, ok := seen[f.Name]; !ok && !f.Hidden {
			t.Errorf("--%s is in no group of latch serve --help: add it to serveFlagGroups", f.Name)
		}
	})
	help := serveUsage(cmd)
	for _, want := range []string{"Examples:", "API flags:", "Datastore flags:", "Cluster flags:", "TLS flags:", "--datastore-bootstrap-files"} {
		if !strings.Contains(help, want) {
			t.Errorf("latch serve --help lacks %q", want)
		}
	}
	if strings.Contains(help, "--grpc-max-workers") {
		t.Error("latch serve --help shows a SpiceDB flag latch refuses")
	}
}

// TestServeSpiceDBFlags: SpiceDB's flag names either work or fail naming what latch has.
func TestServeSpiceDBFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--grpc-max-workers", "4"}, "--grpc-max-workers is a SpiceDB flag latch does not have: use --max-inflight-checks"},
		{[]string{"--datastore-readonly"}, "--datastore-readonly is a SpiceDB flag latch does not have"},
		{[]string{"--grpc-enabled=false"}, "latch always serves gRPC"},
	} {
		r := invocation{}.run(context.Background(), append([]string{"serve", "--datastore-engine", "memory"}, tc.args...)...)
		if r.code != 1 || !strings.Contains(r.err, tc.want) {
			t.Errorf("serve %v: status %d, stderr %q; want %q", tc.args, r.code, r.err, tc.want)
		}
	}
	var cfg server.Config
	cmd := &cobra.Command{}
	addSpiceDBFlags(cmd, &cfg)
	if err := cmd.ParseFlags([]string{"--http-enabled=false", "--metrics-enabled=false", "--dispatch-cache-enabled=false", "--grpc-shutdown-grace-period", "3s", "--write-relationships-max-updates-per-call", "50"}); err != nil {
		t.Fatal(err)
	}
	if err := applySpiceDBFlags(cmd, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != "-" || cfg.MetricsAddr != "-" || cfg.DispatchCacheMaxBytes != -1 || cfg.ShutdownGrace != 3*time.Second || cfg.MaxUpdatesPerWrite != 50 {
		t.Errorf("SpiceDB's flags applied as %+v", cfg)
	}
}
