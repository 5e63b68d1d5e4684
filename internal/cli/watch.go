package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"github.com/spf13/cobra"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relv1"
)

// WatchConfig is what `latch watch` asks the server for.
type WatchConfig struct {
	ObjectTypes []string // only relationships with these resource types
	Filters     []string // only relationships matching one of these filters (FilterHelp)
	Start       string   // ZedToken to resume after; "" watches from now
	Checkpoints bool     // print CHECKPOINT lines while idle
	Schema      bool     // print SCHEMA lines when the schema changes
	Revisions   bool     // print a REVISION line after each revision's changes
}

// Validate reports what is wrong with c.
func (c WatchConfig) Validate() error {
	if len(c.ObjectTypes) > 0 && len(c.Filters) > 0 {
		return errors.New("--object-types and --filter cannot be combined: choose one")
	}
	return nil
}

// request builds the WatchRequest c describes.
func (c WatchConfig) request() (*v1.WatchRequest, error) {
	req := &v1.WatchRequest{OptionalObjectTypes: c.ObjectTypes}
	for _, f := range c.Filters {
		pf, err := parseFilter(f)
		if err != nil {
			return nil, err
		}
		req.OptionalRelationshipFilters = append(req.OptionalRelationshipFilters, pf)
	}
	if c.Start != "" {
		req.OptionalStartCursor = &v1.ZedToken{Token: c.Start}
	}
	// Relationship updates come without asking; listing them would hide a server that
	// sends them only when listed (SpiceDB and zed do not list them).
	if c.Checkpoints {
		req.OptionalUpdateKinds = append(req.OptionalUpdateKinds, v1.WatchKind_WATCH_KIND_INCLUDE_CHECKPOINTS)
	}
	if c.Schema {
		req.OptionalUpdateKinds = append(req.OptionalUpdateKinds, v1.WatchKind_WATCH_KIND_INCLUDE_SCHEMA_UPDATES)
	}
	return req, nil
}

func newWatchCommand(env Env) *cobra.Command {
	var flags clientFlags
	var cfg WatchConfig
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print relationship changes as they are committed, one a line",
		Long: `Print relationship changes as they are committed, until interrupted:

  TOUCH document:readme#viewer@user:alice     created, or caveat/expiration replaced
  DELETE document:readme#viewer@user:alice    deleted
  SCHEMA <token>                              the schema changed (with --schema)
  CHECKPOINT <token>                          nothing changed up to <token> (with --checkpoints)
  REVISION <token>                            the changes above were committed at <token> (with --revisions)

Resume after a revision with --start <token>: the token a write printed, the last
REVISION or the last CHECKPOINT. Without --start the watch begins at the newest revision.

` + FilterHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cc, err := flags.resolve(cmd, env)
			if err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			return watch(cmd.Context(), cc, cfg, env)
		},
	}
	addClientFlags(cmd, &flags)
	fs := cmd.Flags()
	fs.StringSliceVar(&cfg.ObjectTypes, "object-types", nil, "only changes to relationships of these resource types (comma-separated)")
	fs.StringArrayVar(&cfg.Filters, "filter", nil, "only changes to relationships matching FILTER (repeatable; any may match)")
	fs.StringVar(&cfg.Start, "start", "", "ZedToken to resume after (default: now)")
	fs.BoolVar(&cfg.Checkpoints, "checkpoints", false, "print a CHECKPOINT line with the current token while idle")
	fs.BoolVar(&cfg.Schema, "schema", false, "print a SCHEMA line when the schema changes")
	fs.BoolVar(&cfg.Revisions, "revisions", false, "print a REVISION line with its token after each revision's changes")
	return cmd
}

// watch prints the changes the server streams until ctx ends (a clean exit) or the
// stream fails.
func watch(ctx context.Context, cc ClientConfig, cfg WatchConfig, env Env) error {
	req, err := cfg.request()
	if err != nil {
		return err
	}
	c, err := dial(cc)
	if err != nil {
		return err
	}
	defer c.Close()
	stream, err := c.Watch(ctx, req)
	if err != nil {
		return c.fail("watching", err)
	}
	out := bufio.NewWriter(env.Out)
	defer out.Flush()
	for {
		resp, err := stream.Recv()
		if ctx.Err() != nil {
			return nil // interrupted: the normal end of a watch
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return c.fail("watching", err)
		}
		printWatchResponse(out, resp, cfg.Revisions)
		if err := out.Flush(); err != nil {
			return err
		}
	}
}

// printWatchResponse writes one line per change in resp, then the revision's token
// when revisions is set.
func printWatchResponse(w io.Writer, resp *v1.WatchResponse, revisions bool) {
	for _, u := range resp.GetUpdates() {
		op := strings.TrimPrefix(u.GetOperation().String(), "OPERATION_")
		fmt.Fprintln(w, op+" "+rel.String(relv1.FromRelationship(u.GetRelationship())))
	}
	tok := resp.GetChangesThrough().GetToken()
	if resp.GetSchemaUpdated() {
		fmt.Fprintln(w, "SCHEMA "+tok)
	}
	if resp.GetIsCheckpoint() {
		fmt.Fprintln(w, "CHECKPOINT "+tok)
	} else if revisions {
		fmt.Fprintln(w, "REVISION "+tok)
	}
}
