// Command materialize-consumer keeps a PostgreSQL copy of a Materialize endpoint's
// permission sets (authzed.api.materialize.v0, served by `latch serve`), the
// architecture AuthZed recommends for its Materialize: LookupPermissionSets into the
// tables member_to_set and set_to_set, then WatchPermissionSets from the revision
// stored with them, each revision's changes and its token in one transaction, so a
// consumer killed at any point resumes where its last commit left off without a gap.
// A breaking schema change (or a LookupPermissionSetsRequired) fills fresh tables by
// a new LookupPermissionSets while the old ones are still served, and swaps them in
// one transaction; a rebuild resumes from its stored cursor.
//
// An application answers "which documents may user U view" by joining its own
// tables to these two (the `lookup` subcommand runs the join, lookupSQL): AuthZed's
// documented join, the sets U is a member of and ONE hop through set_to_set, kept where
// the set is a document's view. One hop reaches every chain because the server streams
// each set's child sets transitively (every set below it), as latch does.
//
// To run it against latch (README.md beside this file says more):
//
//	latch serve --grpc-preshared-key secret --materialize document#view@user
//	go run ./examples/materialize-consumer --endpoint localhost:50051 --token secret \
//	    --insecure --postgres postgres://localhost:5432/app
//	go run ./examples/materialize-consumer lookup --postgres postgres://localhost:5432/app \
//	    --permission document#view --subject user:alice
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	v0 "github.com/authzed/authzed-go/proto/authzed/api/materialize/v0"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "materialize-consumer:", err)
		stop()
		os.Exit(1)
	}
}

// run runs the consumer, or the lookup subcommand when args begin with "lookup".
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "lookup" {
		return runLookup(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("materialize-consumer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoint := fs.String("endpoint", "localhost:50051", "gRPC address of the Materialize API (latch's --grpc-addr)")
	token := fs.String("token", "", "bearer token the server expects (latch's --grpc-preshared-key)")
	plaintext := fs.Bool("insecure", false, "connect without TLS (a loopback or private-network server)")
	pg := fs.String("postgres", "", "PostgreSQL connection URI of the database to keep the tables in")
	pageSize := fs.Uint("page-size", 1000, "permission sets per LookupPermissionSets stream (one transaction each)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *pg == "":
		return errors.New("--postgres is required: the database to keep member_to_set and set_to_set in")
	case *pageSize == 0 || *pageSize > 1<<31:
		return fmt.Errorf("--page-size is %d; it must be between 1 and 2^31", *pageSize)
	}
	conn, err := dial(*endpoint, *token, *plaintext)
	if err != nil {
		return err
	}
	defer conn.Close()
	db, err := pgxpool.New(ctx, *pg)
	if err != nil {
		return fmt.Errorf("--postgres: %w", err)
	}
	defer db.Close()
	c := &consumer{db: db, client: v0.NewWatchPermissionSetsServiceClient(conn), pageSize: uint32(*pageSize), log: slog.New(slog.NewTextHandler(stderr, nil))}
	return c.run(ctx)
}

// bearer sends the token with every call.
type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }

// dial connects to endpoint, with TLS (the system's roots) unless plaintext.
func dial(endpoint, token string, plaintext bool) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if !plaintext {
		creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: token, secure: !plaintext}))
	}
	conn, err := grpc.NewClient(endpoint, opts...)
	if err != nil {
		return nil, fmt.Errorf("--endpoint %q: %w", endpoint, err)
	}
	return conn, nil
}

// runLookup prints the ids of the resources on which a subject has a permission, as
// the stored tables say.
func runLookup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("materialize-consumer lookup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pg := fs.String("postgres", "", "PostgreSQL connection URI of the consumer's database")
	permission := fs.String("permission", "", "resource type and permission, as document#view")
	subject := fs.String("subject", "", "the subject, as user:alice")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rtype, perm, ok := strings.Cut(*permission, "#")
	if !ok || rtype == "" || perm == "" {
		return fmt.Errorf("--permission %q: want a resource type and a permission, as document#view", *permission)
	}
	stype, sid, ok := strings.Cut(*subject, ":")
	if !ok || stype == "" || sid == "" {
		return fmt.Errorf("--subject %q: want a type and an id, as user:alice", *subject)
	}
	if *pg == "" {
		return errors.New("--postgres is required: the consumer's database")
	}
	db, err := pgxpool.New(ctx, *pg)
	if err != nil {
		return fmt.Errorf("--postgres: %w", err)
	}
	defer db.Close()
	ids, rev, err := lookup(ctx, db, rtype, perm, stype, sid)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "at revision %s\n", rev.GetToken())
	for _, id := range ids {
		fmt.Fprintln(stdout, id)
	}
	return nil
}
