package server

import (
	"strings"
	"testing"
)

func TestConfigDefaultsAndValidate(t *testing.T) {
	c := Config{}.WithDefaults()
	if c.GRPCAddr != DefaultGRPCAddr || c.HTTPAddr != "" || c.DatastoreEngine != "pebble" || c.MaxUpdatesPerWrite != 1000 ||
		c.MaxRelationshipContextBytes != 25000 || c.ReadRelationshipsLimit != 1000 || c.MaxRequestBytes != 4<<20 {
		t.Errorf("defaults: %+v", c)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero config: %v", err)
	}
	// The dispatch cache's default depends on the engine; a size given is kept.
	for _, tc := range []struct {
		cfg  Config
		want int64
	}{
		{Config{}, DefaultDispatchCacheMaxBytes},
		{Config{DatastoreEngine: "postgres"}, DefaultDispatchCacheMaxBytes},
		{Config{DatastoreEngine: "memory"}, DefaultMemoryDispatchCacheMaxBytes},
		{Config{DatastoreEngine: "memory", DispatchCacheMaxBytes: 64 << 20}, 64 << 20},
		{Config{DatastoreEngine: "memory", DispatchCacheMaxBytes: -1}, -1},
	} {
		if got := tc.cfg.WithDefaults().DispatchCacheMaxBytes; got != tc.want {
			t.Errorf("dispatch cache of %+v: %d bytes, want %d", tc.cfg, got, tc.want)
		}
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{MaxDepth: -1}, "max depth must not be negative"},
		{Config{GRPCAddr: "nonsense"}, `grpc address "nonsense"`},
		{Config{HTTPAddr: "10.0.0.1:80"}, "not a loopback address"},
		{Config{PresharedKeys: []string{" "}}, "preshared key 1 is empty"},
		{Config{DatastoreEngine: "spanner"}, `unknown datastore engine "spanner" (supported: pebble, memory, postgres, cockroachdb)`},
		// The API's key does not protect metrics and profiles: they need their own.
		{Config{MetricsAddr: "0.0.0.0:9090", PresharedKeys: []string{"k"}}, `metrics address "0.0.0.0:9090" is not a loopback address: set --metrics-preshared-key`},
		{Config{MetricsAddr: "-", PProf: true}, "pprof is served on the metrics address, which is turned off"},
		{Config{GRPCTLSCertPath: "cert.pem"}, "--grpc-tls-cert-path and --grpc-tls-key-path go together"},
		{Config{HTTPTLSKeyPath: "key.pem"}, "--http-tls-cert-path and --http-tls-key-path go together"},
		{Config{NoAuth: true, HTTPAddr: "0.0.0.0:8443"}, `http address "0.0.0.0:8443" is not a loopback address: set a preshared key instead of --insecure-no-auth`},
		{Config{NoAuth: true, PresharedKeys: []string{"k"}}, "--insecure-no-auth and --grpc-preshared-key contradict each other"},
		{Config{PresharedKeys: []string{"k"}, Cluster: ClusterConfig{Enabled: true, Addr: ":50053", Upstream: "static:///a:1"}}, "needs a datastore the nodes share (postgres or cockroachdb), not pebble"},
		{Config{NoAuth: true, DatastoreEngine: "postgres", DatastoreURI: "postgres://x", Cluster: ClusterConfig{Enabled: true, Addr: ":50053", Upstream: "static:///a:1"}}, "needs --dispatch-cluster-preshared-key"},
		{Config{PresharedKeys: []string{"k"}, DatastoreEngine: "postgres", DatastoreURI: "postgres://x", Cluster: ClusterConfig{Enabled: true}}, "needs --dispatch-upstream-addr"},
		// The dispatch service beyond loopback needs TLS, or to be told the network is
		// private; without a key (--insecure-no-auth) it must stay on loopback.
		{
			Config{PresharedKeys: []string{"k"}, DatastoreEngine: "postgres", DatastoreURI: "postgres://x", Cluster: ClusterConfig{Enabled: true, Addr: ":50053", Upstream: "static:///a:1"}},
			`--dispatch-cluster-addr ":50053" is not a loopback address and the dispatch service has no TLS`,
		},
		{
			Config{PresharedKeys: []string{"k"}, DatastoreEngine: "postgres", DatastoreURI: "postgres://x", Cluster: ClusterConfig{Enabled: true, Addr: "10.0.0.5:50053", Upstream: "static:///a:1"}},
			"set --dispatch-cluster-tls-cert-path and --dispatch-cluster-tls-key-path, or --dispatch-cluster-insecure-plaintext",
		},
		{
			Config{NoAuth: true, DatastoreEngine: "postgres", DatastoreURI: "postgres://x", Cluster: ClusterConfig{Enabled: true, Addr: "0.0.0.0:50053", Upstream: "static:///a:1", PresharedKey: "c", InsecurePlaintext: true}},
			`dispatch cluster address "0.0.0.0:50053" is not a loopback address: set a preshared key instead of --insecure-no-auth`,
		},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
	if err := (Config{GRPCAddr: "0.0.0.0:50051", HTTPAddr: "[::]:8443", PresharedKeys: []string{"k"}}).Validate(); err != nil {
		t.Errorf("public addresses with a key: %v", err)
	}
	if err := (Config{MetricsAddr: "0.0.0.0:9090", MetricsPresharedKey: "m"}).Validate(); err != nil {
		t.Errorf("public metrics address with a metrics key: %v", err)
	}
	if err := (Config{GRPCAddr: "localhost:0", HTTPAddr: "[::1]:0"}).Validate(); err != nil {
		t.Errorf("loopback addresses without a key: %v", err)
	}
	node := func(cc ClusterConfig) Config {
		cc.Enabled, cc.Upstream = true, "static:///a:1"
		return Config{PresharedKeys: []string{"k"}, DatastoreEngine: "postgres", DatastoreURI: "postgres://x", Cluster: cc}
	}
	for _, cc := range []ClusterConfig{
		{Addr: DefaultClusterAddr},
		{Addr: "0.0.0.0:50053", TLSCertPath: "c.pem", TLSKeyPath: "k.pem"},
		{Addr: "0.0.0.0:50053", InsecurePlaintext: true},
	} {
		if err := node(cc).Validate(); err != nil {
			t.Errorf("dispatch listener %+v: %v", cc, err)
		}
	}
	if !isLoopback(strings.Split(DefaultClusterAddr, ":")[0]) {
		t.Errorf("the default dispatch address %s is not loopback", DefaultClusterAddr)
	}
}
