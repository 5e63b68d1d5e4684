package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"github.com/spf13/cobra"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relv1"
)

// relationshipSyntax documents how relationships are written on the command line.
const relationshipSyntax = `A relationship is written resource#relation@subject, optionally followed by a caveat
and an expiration:

  document:readme#viewer@user:alice
  document:readme#viewer@group:eng#member
  document:readme#viewer@user:*
  document:readme#viewer@user:bob[on_weekdays:{"tz":"UTC"}]
  document:readme#viewer@user:carol[expiration:2030-01-01T00:00:00Z]

Give "-" as the only argument to read relationships from standard input, one a line
(blank lines and lines starting with // are skipped).`

func newRelationshipCommand(env Env) *cobra.Command {
	var flags clientFlags
	cmd := &cobra.Command{
		Use:     "relationship",
		Aliases: []string{"rel"},
		Short:   "Write, delete and read relationships on a running server",
	}
	addClientFlags(cmd, &flags)
	for _, w := range []struct {
		use, short string
		op         v1.RelationshipUpdate_Operation
	}{
		{"create", "Create relationships; fails, writing none, if any exists", v1.RelationshipUpdate_OPERATION_CREATE},
		{"touch", "Create relationships or replace their caveat and expiration", v1.RelationshipUpdate_OPERATION_TOUCH},
		{"delete", "Delete relationships (missing ones are ignored)", v1.RelationshipUpdate_OPERATION_DELETE},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:   w.use + " RELATIONSHIP...",
			Short: w.short,
			Long: w.short + `, in one atomic write.
Prints the ZedToken of the write, which --consistency at-least:ZEDTOKEN accepts.

` + relationshipSyntax,
			Args: cobra.MinimumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				cfg, err := flags.resolve(cmd, env)
				if err != nil {
					return err
				}
				updates, err := parseUpdates(args, w.op, env)
				if err != nil {
					return err
				}
				return writeRelationships(cmd, cfg, w.use, updates, env)
			},
		})
	}
	cmd.AddCommand(newReadRelationshipsCommand(env, &flags))
	return cmd
}

// parseUpdates parses the relationship arguments (or standard input for "-").
func parseUpdates(args []string, op v1.RelationshipUpdate_Operation, env Env) ([]*v1.RelationshipUpdate, error) {
	if len(args) == 1 && args[0] == "-" {
		lines, err := readLines(env.In)
		if err != nil {
			return nil, err
		}
		args = lines
	}
	if len(args) == 0 {
		return nil, errors.New("no relationships given")
	}
	updates := make([]*v1.RelationshipUpdate, 0, len(args))
	for _, a := range args {
		r, err := rel.Parse(a)
		if err != nil {
			return nil, err // rel.Parse's errors quote the relationship
		}
		wire, err := relv1.Relationship(r)
		if err != nil {
			return nil, err
		}
		updates = append(updates, &v1.RelationshipUpdate{Operation: op, Relationship: wire})
	}
	return updates, nil
}

// readLines returns the non-blank, non-comment lines of r, trimmed.
func readLines(r io.Reader) ([]string, error) {
	var lines []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "//") {
			lines = append(lines, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading standard input: %w", err)
	}
	return lines, nil
}

func writeRelationships(cmd *cobra.Command, cfg ClientConfig, verb string, updates []*v1.RelationshipUpdate, env Env) error {
	c, err := dial(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.WriteRelationships(cmd.Context(), &v1.WriteRelationshipsRequest{Updates: updates})
	if err != nil {
		return c.fail(verb+" relationships", err)
	}
	fmt.Fprintln(env.Out, resp.GetWrittenAt().GetToken())
	return nil
}

func newReadRelationshipsCommand(env Env, flags *clientFlags) *cobra.Command {
	var consistency string
	cmd := &cobra.Command{
		Use:   "read FILTER",
		Short: "Print the relationships matching FILTER, one a line",
		Long:  "Print the relationships matching FILTER, one a line.\n\n" + FilterHelp,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := flags.resolve(cmd, env)
			if err != nil {
				return err
			}
			filter, err := parseFilter(args[0])
			if err != nil {
				return err
			}
			cons, err := parseConsistency(consistency)
			if err != nil {
				return err
			}
			return readRelationships(cmd, cfg, &v1.ReadRelationshipsRequest{RelationshipFilter: filter, Consistency: cons}, env)
		},
	}
	cmd.Flags().StringVar(&consistency, "consistency", "full", ConsistencyHelp)
	return cmd
}

func readRelationships(cmd *cobra.Command, cfg ClientConfig, req *v1.ReadRelationshipsRequest, env Env) error {
	c, err := dial(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	stream, err := c.ReadRelationships(cmd.Context(), req)
	if err != nil {
		return c.fail("reading relationships", err)
	}
	out := bufio.NewWriter(env.Out)
	defer out.Flush()
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return c.fail("reading relationships", err)
		}
		fmt.Fprintln(out, rel.String(relv1.FromRelationship(resp.GetRelationship())))
	}
}
