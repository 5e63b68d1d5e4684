package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latch-authz/latch/internal/store/pebble"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// TestDatastoreStartupErrors: each datastore that cannot be used is a clear error at
// start-up, and nothing of it is overwritten.
func TestDatastoreStartupErrors(t *testing.T) {
	foreign := t.TempDir()
	if err := os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	locked := t.TempDir()
	held, err := pebble.Open(locked, pebble.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	pg := pgtest.Get(t)
	unmigrated := pg.NewDatabase(t, "", nil)

	for _, tc := range []struct {
		name, engine, uri, want string
	}{
		{"directory of other files", "pebble", foreign, "not a latch data directory"},
		{"directory in use", "pebble", locked, "in use by another process"},
		{"unreachable database", "postgres", "postgres://latch@127.0.0.1:1/latch?connect_timeout=2", "opening the postgres datastore"},
		{"malformed connection string", "postgres", "postgres://%zz", "opening the postgres datastore"},
		{"unmigrated database", "postgres", unmigrated, "latch datastore migrate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Config{
				GRPCAddr: "127.0.0.1:0", HTTPAddr: "-", PresharedKeys: []string{testKey},
				DatastoreEngine: tc.engine, DatastoreURI: tc.uri,
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	got, err := os.ReadFile(filepath.Join(foreign, "notes.txt"))
	if err != nil || string(got) != "mine" {
		t.Errorf("the foreign directory was changed: %q, %v", got, err)
	}
	if entries, _ := os.ReadDir(foreign); len(entries) != 1 {
		t.Errorf("the foreign directory gained files: %d entries", len(entries))
	}
}
