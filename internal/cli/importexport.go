package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relv1"
)

// importBatch is how many relationships one ImportBulkRelationships message carries.
const importBatch = 1000

// The file formats import and export read and write: one relationship a line, either
// in latch's relationship syntax or as the JSON form of authzed.api.v1.Relationship.
const (
	formatText  = "text"
	formatJSONL = "jsonl"
)

// fileFormat picks the format: the flag when set, else from the file's extension.
func fileFormat(flag, path string) (string, error) {
	switch flag {
	case formatText, formatJSONL:
		return flag, nil
	case "", "auto":
		if ext := filepath.Ext(path); ext == ".jsonl" || ext == ".ndjson" {
			return formatJSONL, nil
		}
		return formatText, nil
	}
	return "", fmt.Errorf("--format %q: expected text, jsonl or auto", flag)
}

func parseRelationshipLine(line, format string) (*v1.Relationship, error) {
	if format == formatJSONL {
		var r v1.Relationship
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(line), &r); err != nil {
			return nil, err
		}
		return &r, nil
	}
	r, err := rel.Parse(line)
	if err != nil {
		return nil, err
	}
	return relv1.Relationship(r)
}

// progress reports an import's advance on stderr at most once a second.
type progress struct {
	w         io.Writer
	total     int64 // bytes to read; 0 when unknown (standard input)
	start     time.Time
	lastPrint time.Time
}

func (p *progress) update(rels int, bytesRead int64, final bool) {
	now := time.Now()
	if !final && now.Sub(p.lastPrint) < time.Second {
		return
	}
	p.lastPrint = now
	rate := float64(rels) / max(now.Sub(p.start).Seconds(), 1e-9)
	bar := ""
	if p.total > 0 {
		done := min(int(20*bytesRead/p.total), 20)
		bar = fmt.Sprintf("[%s%s] %3d%% ", strings.Repeat("#", done), strings.Repeat(".", 20-done), 100*bytesRead/p.total)
	}
	fmt.Fprintf(p.w, "%s%d relationships sent, %.0f/s\n", bar, rels, rate)
}

// countingReader counts the bytes read through it, for the progress bar.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// conflict is what import does with a relationship the server already holds.
type conflict int

const (
	conflictFail  conflict = iota // the default: one transaction, nothing written on a conflict
	conflictSkip                  // keep the stored relationship, write the others
	conflictTouch                 // overwrite it (its caveat and expiration too)
)

func newImportCommand(env Env) *cobra.Command {
	var flags clientFlags
	var format string
	var skipExisting, touch, noSchema bool
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Restore a backup made by latch export: its schema, then every relationship",
		Long: `Restore FILE ("-" for standard input), as "latch export" wrote it: the schema the
file carries is written first (unless --no-schema), then every relationship. One
relationship a line, in the syntax of "latch relationship create" (blank lines and //
comments are skipped), or with --format jsonl (the default for .jsonl files) the JSON
form of authzed.api.v1.Relationship.

By default the relationships go through ImportBulkRelationships in one transaction: if
any already exists, is given twice or is invalid, nothing is written. --skip-existing
keeps the relationships the server already holds and writes the others; --touch
overwrites them (as zed's --conflict-strategy skip and touch do); both write in batches
of 1,000, each its own transaction. Progress goes to standard error; the result is one
line on standard output.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := flags.resolve(cmd, env)
			if err != nil {
				return err
			}
			fmtName, err := fileFormat(format, args[0])
			if err != nil {
				return err
			}
			var strategy conflict
			switch {
			case skipExisting && touch:
				return errors.New("--skip-existing and --touch contradict each other: choose one")
			case skipExisting:
				strategy = conflictSkip
			case touch:
				strategy = conflictTouch
			}
			in, total := env.In, int64(0)
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				if st, err := f.Stat(); err == nil {
					total = st.Size()
				}
				in = f
			}
			c, err := dial(cfg)
			if err != nil {
				return err
			}
			defer c.Close()
			imp := &importer{
				ctx: cmd.Context(), c: c, format: fmtName, strategy: strategy, writeSchema: !noSchema,
				in: &countingReader{r: in}, prog: &progress{w: env.Err, total: total, start: time.Now()},
			}
			if err := imp.run(); err != nil {
				return err
			}
			fmt.Fprintln(env.Out, imp.summary())
			return nil
		},
	}
	addClientFlags(cmd, &flags)
	fs := cmd.Flags()
	fs.StringVar(&format, "format", "auto", "text, jsonl, or auto (jsonl for .jsonl and .ndjson files)")
	fs.BoolVar(&skipExisting, "skip-existing", false, "keep relationships the server already holds and write the rest (batches of 1,000, each its own transaction)")
	fs.BoolVar(&touch, "touch", false, "overwrite relationships the server already holds (batches of 1,000, each its own transaction)")
	fs.BoolVar(&noSchema, "no-schema", false, "do not write the schema the file carries")
	return cmd
}

func newExportCommand(env Env) *cobra.Command {
	var flags clientFlags
	var format, output, consistency string
	cmd := &cobra.Command{
		Use:   "export [FILTER]",
		Short: "Back up the schema and every relationship (or those matching FILTER)",
		Long: `Write the schema and every relationship, or those matching FILTER (the filter
syntax of "latch relationship read"), one a line, all read at one revision (the
schema's, unless --consistency names another) through ExportBulkRelationships. The
schema comes first, as a block of "//|" comment lines, or with --format jsonl as a
first line {"schema": ..., "revision": ...} before the JSON form of each
authzed.api.v1.Relationship; "latch import" restores both formats into a server.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := flags.resolve(cmd, env)
			if err != nil {
				return err
			}
			fmtName, err := fileFormat(format, output)
			if err != nil {
				return err
			}
			req := &v1.ExportBulkRelationshipsRequest{}
			if req.Consistency, err = parseConsistency(consistency); err != nil {
				return err
			}
			if len(args) == 1 {
				if req.OptionalRelationshipFilter, err = parseFilter(args[0]); err != nil {
					return err
				}
			}
			out := env.Out
			if output != "" && output != "-" {
				f, err := os.Create(output)
				if err != nil {
					return err
				}
				defer f.Close()
				out = f
			}
			return export(cmd, cfg, req, fmtName, out)
		},
	}
	addClientFlags(cmd, &flags)
	cmd.Flags().StringVar(&format, "format", "auto", "text, jsonl, or auto (jsonl when -o names a .jsonl or .ndjson file)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "file to write (default standard output)")
	cmd.Flags().StringVar(&consistency, "consistency", "full", ConsistencyHelp)
	return cmd
}

func export(cmd *cobra.Command, cfg ClientConfig, req *v1.ExportBulkRelationshipsRequest, format string, out io.Writer) error {
	c, err := dial(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	w := bufio.NewWriter(out)
	schema, err := c.ReadSchema(cmd.Context(), &v1.ReadSchemaRequest{})
	switch {
	case status.Code(err) == codes.NotFound: // no schema yet: nothing to carry
	case err != nil:
		return c.fail("reading the schema to export", err)
	default:
		// The relationships are read at the schema's revision unless the user chose one.
		if req.GetConsistency().GetFullyConsistent() {
			req.Consistency = &v1.Consistency{Requirement: &v1.Consistency_AtExactSnapshot{AtExactSnapshot: schema.GetReadAt()}}
		}
		if err := writeBackupHeader(w, format, schema.GetSchemaText(), schema.GetReadAt().GetToken()); err != nil {
			return err
		}
	}
	stream, err := c.ExportBulkRelationships(cmd.Context(), req)
	if err != nil {
		return c.fail("exporting", err)
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return c.fail("exporting", err)
		}
		for _, r := range resp.GetRelationships() {
			if format == formatJSONL {
				b, err := protojson.Marshal(r)
				if err != nil {
					return err
				}
				w.Write(b)
			} else {
				w.WriteString(rel.String(relv1.FromRelationship(r)))
			}
			w.WriteByte('\n')
		}
	}
	return w.Flush()
}
