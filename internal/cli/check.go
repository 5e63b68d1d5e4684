package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"github.com/spf13/cobra"

	"github.com/latch-authz/latch/internal/rel"
)

// CheckConfig is one permission check.
type CheckConfig struct {
	Client ClientConfig
	// Check is `resource#permission@subject`, optionally followed by ` with {json}`.
	Check string
	// Context is caveat context as a JSON object ("" for none).
	Context string
	// Consistency is a --consistency value (see ConsistencyHelp).
	Consistency string
	// ErrorOnNoPermission makes anything but HAS_PERMISSION exit with status 1.
	ErrorOnNoPermission bool
	// Explain asks the server how it answered and prints the tree of steps.
	Explain bool
}

func newCheckCommand(env Env) *cobra.Command {
	var flags clientFlags
	var cfg CheckConfig
	cmd := &cobra.Command{
		Use:   "check RESOURCE#PERMISSION@SUBJECT",
		Short: "Check whether a subject has a permission on a resource",
		Long: `Check whether a subject has a permission on a resource, for example

  latch check document:readme#view@user:alice
  latch check 'document:readme#view@user:alice with {"ip": "10.0.0.1"}'
  latch check document:readme#view@user:alice --context '{"ip": "10.0.0.1"}'

Prints "true" (HAS_PERMISSION), "false" (NO_PERMISSION) or, when a caveat needs
context the request did not give, "caveated (missing: a, b)" (CONDITIONAL_PERMISSION).
With --explain, the answer is followed by the steps the server took to reach it,
as a tree (zed permission check --explain prints the same tree).

As with zed permission check, the exit status is 0 whatever the answer, so that
scripts can tell an answer from an error (status 1); with --error-on-no-permission,
"false" and "caveated" exit with status 1 too.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if cfg.Client, err = flags.resolve(cmd, env); err != nil {
				return err
			}
			cfg.Check = args[0]
			return check(cmd, cfg, env)
		},
	}
	addClientFlags(cmd, &flags)
	cmd.Flags().StringVar(&cfg.Context, "context", "", "caveat context as a JSON object")
	cmd.Flags().StringVar(&cfg.Consistency, "consistency", "full", ConsistencyHelp)
	cmd.Flags().BoolVar(&cfg.ErrorOnNoPermission, "error-on-no-permission", false, `exit with status 1 unless the answer is "true"`)
	cmd.Flags().BoolVar(&cfg.Explain, "explain", false, "print how the server answered: a tree of the relations and permissions it checked")
	return cmd
}

// checkRequest builds the request cfg describes.
func checkRequest(cfg CheckConfig) (*v1.CheckPermissionRequest, error) {
	resource, permission, subject, ctx, err := rel.ParseCheck(cfg.Check)
	if err != nil {
		return nil, err
	}
	if cfg.Context != "" {
		if len(ctx) > 0 {
			return nil, errors.New(`caveat context given twice: use either "with {...}" or --context`)
		}
		if err := json.Unmarshal([]byte(cfg.Context), &ctx); err != nil {
			return nil, fmt.Errorf("--context: not a JSON object: %w", err)
		}
	}
	wireCtx, err := contextToV1(ctx)
	if err != nil {
		return nil, fmt.Errorf("caveat context: %w", err)
	}
	cons, err := parseConsistency(cfg.Consistency)
	if err != nil {
		return nil, err
	}
	return &v1.CheckPermissionRequest{
		Consistency: cons,
		Resource:    objectToV1(resource),
		Permission:  permission,
		Subject:     subjectToV1(subject),
		Context:     wireCtx,
		WithTracing: cfg.Explain,
	}, nil
}

func check(cmd *cobra.Command, cfg CheckConfig, env Env) error {
	req, err := checkRequest(cfg)
	if err != nil {
		return err
	}
	c, err := dial(cfg.Client)
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.CheckPermission(cmd.Context(), req)
	if err != nil {
		return c.fail("checking permission", err)
	}
	answer, granted, err := describeCheck(resp)
	if err != nil {
		return err
	}
	fmt.Fprintln(env.Out, answer)
	if cfg.Explain {
		if t := resp.GetDebugTrace().GetCheck(); t != nil {
			writeCheckTrace(env.Out, t)
		} else {
			fmt.Fprintln(env.Err, "latch: the server returned no trace of the check")
		}
	}
	if cfg.ErrorOnNoPermission && !granted {
		return exitCode(1)
	}
	return nil
}

// describeCheck renders a check answer and whether it grants unconditionally.
func describeCheck(resp *v1.CheckPermissionResponse) (string, bool, error) {
	switch p := resp.GetPermissionship(); p {
	case v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION:
		return "true", true, nil
	case v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION:
		return "false", false, nil
	case v1.CheckPermissionResponse_PERMISSIONSHIP_CONDITIONAL_PERMISSION:
		missing := resp.GetPartialCaveatInfo().GetMissingRequiredContext()
		if len(missing) == 0 {
			return "caveated", false, nil
		}
		return "caveated (missing: " + strings.Join(missing, ", ") + ")", false, nil
	default:
		return "", false, fmt.Errorf("checking permission: the server answered %v, which is not an answer", p)
	}
}
