package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latch-authz/latch/internal/server"
	"github.com/latch-authz/latch/internal/store/crdb"
	"github.com/latch-authz/latch/internal/store/postgres"
)

// dataDirFlag is the friendlier name for pebble's directory; --datastore-conn-uri (SpiceDB's
// name) says the same for every engine.
const dataDirFlag = "data-dir"

// addDatastoreFlags adds the flags that choose and open a datastore, named as SpiceDB names them.
func addDatastoreFlags(cmd *cobra.Command, cfg *server.Config) {
	fs := cmd.Flags()
	fs.StringVar(&cfg.DatastoreEngine, "datastore-engine", server.DefaultDatastoreEngine,
		"datastore engine: "+strings.Join(server.DatastoreEngines, ", ")+` ("pebble" is embedded and durable; "memory" lasts as long as the process)`)
	fs.StringVar(&cfg.DatastoreURI, "datastore-conn-uri", "", "postgres:// connection string for postgres and cockroachdb, or pebble's data directory")
	fs.String(dataDirFlag, server.DefaultDataDir, "pebble's data directory (same as --datastore-conn-uri for the pebble engine)")
	fs.IntVar(&cfg.ReadConns, "datastore-conn-pool-read-max-open", 0, "connections in the SQL stores' read pool (0: 16)")
	fs.IntVar(&cfg.WriteConns, "datastore-conn-pool-write-max-open", 0, "connections in the SQL stores' write pool (0: 8)")
	fs.StringSliceVar(&cfg.ReplicaURIs, "datastore-read-replica-conn-uri", nil, "PostgreSQL read replica connection strings; repeat or separate with commas")
	fs.DurationVar(&cfg.GCWindow, "datastore-gc-window", server.DefaultGCWindow, "how long old revisions stay readable (for at-least and exact consistency)")
	fs.Var(newByteSize(&cfg.DatastoreBlockCacheBytes, server.DefaultDatastoreBlockCacheBytes), "datastore-block-cache-bytes",
		"the pebble engine's cache of data blocks read from disk: bytes, a size (256MiB, 1GB) or a share of memory (5%)")
}

// resolveDataDir applies --data-dir to the pebble engine, refusing two different directories.
func resolveDataDir(cmd *cobra.Command, cfg *server.Config) error {
	dir, _ := cmd.Flags().GetString(dataDirFlag)
	changed := cmd.Flags().Changed(dataDirFlag)
	if changed && cfg.DatastoreEngine != "pebble" {
		return fmt.Errorf("--%s applies to the pebble engine only, not %q", dataDirFlag, cfg.DatastoreEngine)
	}
	if cfg.DatastoreEngine != "pebble" {
		return nil
	}
	switch {
	case cfg.DatastoreURI == "":
		cfg.DatastoreURI = dir
	case changed && cfg.DatastoreURI != dir:
		return fmt.Errorf("--%s %q and --datastore-conn-uri %q name different directories", dataDirFlag, dir, cfg.DatastoreURI)
	}
	return nil
}

func describeDatastore(cfg server.Config) string {
	cfg = cfg.WithDefaults()
	switch cfg.DatastoreEngine {
	case "pebble":
		return "pebble, data directory " + cfg.DatastoreURI
	case "memory":
		return "memory (everything is lost when the server stops)"
	}
	return cfg.DatastoreEngine
}

// newDatastoreCommand builds `latch datastore`, whose one job is migrating SQL databases.
func newDatastoreCommand(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "datastore",
		Short: "Manage the datastore (migrate a PostgreSQL or CockroachDB database)",
	}
	var engine, uri string
	migrate := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade latch's tables in a PostgreSQL or CockroachDB database",
		Long: `Create or upgrade latch's tables. Run it before the first "latch serve" on a
new database and after upgrading latch; it is safe to run again. The pebble and
memory engines need no migration.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if uri == "" {
				return errors.New("--datastore-conn-uri is required (e.g. postgres://user:pass@127.0.0.1:5432/latch)")
			}
			var err error
			switch engine {
			case "postgres":
				err = postgres.Migrate(cmd.Context(), uri)
			case "cockroachdb":
				err = crdb.Migrate(cmd.Context(), uri)
			default:
				return fmt.Errorf("--datastore-engine %q needs no migration; migrate applies to postgres and cockroachdb", engine)
			}
			if err != nil {
				return fmt.Errorf("migrating %s: %w", engine, err)
			}
			fmt.Fprintf(env.Out, "latch: %s datastore migrated\n", engine)
			return nil
		},
	}
	migrate.Flags().StringVar(&engine, "datastore-engine", "postgres", "postgres or cockroachdb")
	migrate.Flags().StringVar(&uri, "datastore-conn-uri", "", "the database's connection string")
	cmd.AddCommand(migrate)
	return cmd
}
