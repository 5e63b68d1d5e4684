package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relv1"
)

// queryFlags are the flags every lookup and expand shares with `latch check`.
type queryFlags struct {
	client      clientFlags
	context     string
	consistency string
}

func addQueryFlags(cmd *cobra.Command, f *queryFlags) {
	addClientFlags(cmd, &f.client)
	cmd.Flags().StringVar(&f.context, "context", "", "caveat context as a JSON object")
	cmd.Flags().StringVar(&f.consistency, "consistency", "full", ConsistencyHelp)
}

// prepare resolves the client, the consistency and the context.
func (f *queryFlags) prepare(cmd *cobra.Command, env Env) (*client, *v1.Consistency, *structpb.Struct, error) {
	cfg, err := f.client.resolve(cmd, env)
	if err != nil {
		return nil, nil, nil, err
	}
	cons, err := parseConsistency(f.consistency)
	if err != nil {
		return nil, nil, nil, err
	}
	var ctx map[string]any
	if f.context != "" {
		if err := json.Unmarshal([]byte(f.context), &ctx); err != nil {
			return nil, nil, nil, fmt.Errorf("--context: not a JSON object: %w", err)
		}
	}
	wire, err := relv1.Context(ctx)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("caveat context: %w", err)
	}
	c, err := dial(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	return c, cons, wire, nil
}

// describeLookup renders a lookup result: the id, with " (caveated, missing: a, b)"
// when it is conditional.
func describeLookup(id string, p v1.LookupPermissionship, info *v1.PartialCaveatInfo) string {
	if p != v1.LookupPermissionship_LOOKUP_PERMISSIONSHIP_CONDITIONAL_PERMISSION {
		return id
	}
	if missing := info.GetMissingRequiredContext(); len(missing) > 0 {
		return id + " (caveated, missing: " + strings.Join(missing, ", ") + ")"
	}
	return id + " (caveated)"
}

func newLookupResourcesCommand(env Env) *cobra.Command {
	var f queryFlags
	var limit uint32
	cmd := &cobra.Command{
		Use:   "lookup-resources TYPE PERMISSION SUBJECT",
		Short: "List the resources of a type on which a subject has a permission",
		Long: `List the resources of a type on which a subject has a permission, one id a line:

  latch lookup-resources document view user:alice
  latch lookup-resources document view group:eng#member

A resource whose permission depends on caveat context the request did not give is
printed as "ID (caveated, missing: a, b)". --limit pages through the results; every
page is read at the revision of the first.`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := rel.ValidateType(args[0]); err != nil {
				return err
			}
			subject, err := rel.ParseSubject(args[2])
			if err != nil {
				return fmt.Errorf("subject: %w", err)
			}
			c, cons, ctx, err := f.prepare(cmd, env)
			if err != nil {
				return err
			}
			defer c.Close()
			req := &v1.LookupResourcesRequest{
				Consistency: cons, ResourceObjectType: args[0], Permission: args[1],
				Subject: relv1.Subject(subject), Context: ctx, OptionalLimit: limit,
			}
			for {
				stream, err := c.LookupResources(cmd.Context(), req)
				if err != nil {
					return c.fail("looking up resources", err)
				}
				n := uint32(0)
				for {
					resp, err := stream.Recv()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						return c.fail("looking up resources", err)
					}
					n++
					fmt.Fprintln(env.Out, describeLookup(resp.GetResourceObjectId(), resp.GetPermissionship(), resp.GetPartialCaveatInfo()))
					req.OptionalCursor = resp.GetAfterResultCursor()
				}
				if limit == 0 || n < limit {
					return nil
				}
			}
		},
	}
	addQueryFlags(cmd, &f)
	cmd.Flags().Uint32Var(&limit, "limit", 0, "results per page (0: one page with everything)")
	return cmd
}

func newLookupSubjectsCommand(env Env) *cobra.Command {
	var f queryFlags
	var limit uint32
	cmd := &cobra.Command{
		Use:   "lookup-subjects RESOURCE PERMISSION SUBJECT_TYPE[#RELATION]",
		Short: "List the subjects of a type that have a permission on a resource",
		Long: `List the subjects of a type that have a permission on a resource, one id a line:

  latch lookup-subjects document:readme view user
  latch lookup-subjects document:readme view group#member

A wildcard is printed as "* (except a, b)" when some subjects are excluded from it;
conditional subjects as "ID (caveated, missing: a, b)". --limit pages through the
concrete subjects (the wildcard comes with the last page); every page is read at the
revision of the first.`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			resource, err := rel.ParseObject(args[0])
			if err != nil {
				return fmt.Errorf("resource: %w", err)
			}
			subjectType, subjectRel, _ := strings.Cut(args[2], "#")
			if err := rel.ValidateType(subjectType); err != nil {
				return fmt.Errorf("subject type: %w", err)
			}
			c, cons, ctx, err := f.prepare(cmd, env)
			if err != nil {
				return err
			}
			defer c.Close()
			req := &v1.LookupSubjectsRequest{
				Consistency: cons, Resource: relv1.Object(resource), Permission: args[1],
				SubjectObjectType: subjectType, OptionalSubjectRelation: subjectRel, Context: ctx, OptionalConcreteLimit: limit,
			}
			for {
				concrete, err := lookupSubjectsPage(cmd, c, req, env.Out)
				if err != nil {
					return c.fail("looking up subjects", err)
				}
				if limit == 0 || concrete < limit {
					return nil
				}
			}
		},
	}
	addQueryFlags(cmd, &f)
	cmd.Flags().Uint32Var(&limit, "limit", 0, "concrete subjects per page (0: one page with everything)")
	return cmd
}

// lookupSubjectsPage prints one page of subjects, leaves req's cursor after it, and
// returns how many concrete (non-wildcard) subjects it held.
func lookupSubjectsPage(cmd *cobra.Command, c *client, req *v1.LookupSubjectsRequest, out io.Writer) (uint32, error) {
	stream, err := c.LookupSubjects(cmd.Context(), req)
	if err != nil {
		return 0, err
	}
	concrete := uint32(0)
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return concrete, nil
		}
		if err != nil {
			return 0, err
		}
		s := resp.GetSubject()
		if s.GetSubjectObjectId() != rel.Wildcard {
			concrete++
		}
		line := describeLookup(s.GetSubjectObjectId(), s.GetPermissionship(), s.GetPartialCaveatInfo())
		var except []string
		for _, ex := range resp.GetExcludedSubjects() {
			except = append(except, describeLookup(ex.GetSubjectObjectId(), ex.GetPermissionship(), ex.GetPartialCaveatInfo()))
		}
		if len(except) > 0 {
			line += " (except " + strings.Join(except, ", ") + ")"
		}
		fmt.Fprintln(out, line)
		req.OptionalCursor = resp.GetAfterResultCursor()
	}
}

func newExpandCommand(env Env) *cobra.Command {
	var f queryFlags
	cmd := &cobra.Command{
		Use:   "expand RESOURCE PERMISSION",
		Short: "Print the tree of relations a permission is computed from",
		Long: `Print a permission's expansion as an indented tree, one level deep as SpiceDB
returns it: operators (union, intersection, exclusion) over the relations they
combine, each relation listing the subjects written on it.

  latch expand document:readme view`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			resource, err := rel.ParseObject(args[0])
			if err != nil {
				return fmt.Errorf("resource: %w", err)
			}
			c, cons, _, err := f.prepare(cmd, env)
			if err != nil {
				return err
			}
			defer c.Close()
			resp, err := c.ExpandPermissionTree(cmd.Context(), &v1.ExpandPermissionTreeRequest{Consistency: cons, Resource: relv1.Object(resource), Permission: args[1]})
			if err != nil {
				return c.fail("expanding", err)
			}
			printTree(env.Out, resp.GetTreeRoot(), "")
			return nil
		},
	}
	addQueryFlags(cmd, &f)
	return cmd
}

func printTree(w io.Writer, n *v1.PermissionRelationshipTree, indent string) {
	head := n.GetExpandedObject().GetObjectType() + ":" + n.GetExpandedObject().GetObjectId() + "#" + n.GetExpandedRelation()
	if in := n.GetIntermediate(); in != nil {
		op := strings.ToLower(strings.TrimPrefix(in.GetOperation().String(), "OPERATION_"))
		fmt.Fprintf(w, "%s%s %s\n", indent, head, op)
		for _, c := range in.GetChildren() {
			printTree(w, c, indent+"  ")
		}
		return
	}
	fmt.Fprintf(w, "%s%s\n", indent, head)
	for _, s := range n.GetLeaf().GetSubjects() {
		subject := rel.SubjectRef{Object: rel.ObjectRef{Type: s.GetObject().GetObjectType(), ID: s.GetObject().GetObjectId()}, Relation: s.GetOptionalRelation()}
		fmt.Fprintf(w, "%s  %s\n", indent, subject)
	}
}
