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
	fmt.Fprintf(p.w, "%s%d relationships, %.0f/s\n", bar, rels, rate)
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

func newImportCommand(env Env) *cobra.Command {
	var flags clientFlags
	var format string
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Create every relationship in a file, in one transaction",
		Long: `Create every relationship in FILE ("-" for standard input) through
ImportBulkRelationships: all of them in one transaction, so if any already exists, is
given twice or is invalid nothing is written. One relationship a line, in the syntax of
"latch relationship create" (blank lines and // comments are skipped), or with
--format jsonl (the default for .jsonl files) the JSON form of authzed.api.v1.Relationship,
as "latch export --format jsonl" writes it. Progress goes to standard error.`,
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
			return importFile(cmd, cfg, &countingReader{r: in}, fmtName, &progress{w: env.Err, total: total, start: time.Now()}, env)
		},
	}
	addClientFlags(cmd, &flags)
	cmd.Flags().StringVar(&format, "format", "auto", "text, jsonl, or auto (jsonl for .jsonl and .ndjson files)")
	return cmd
}

func importFile(cmd *cobra.Command, cfg ClientConfig, in *countingReader, format string, prog *progress, env Env) error {
	c, err := dial(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	stream, err := c.ImportBulkRelationships(cmd.Context())
	if err != nil {
		return c.fail("importing", err)
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	batch := make([]*v1.Relationship, 0, importBatch)
	sent, line := 0, 0
	send := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := stream.Send(&v1.ImportBulkRelationshipsRequest{Relationships: batch}); err != nil {
			_, err = stream.CloseAndRecv() // the server's reason, not io.EOF
			return c.fail("importing", err)
		}
		sent += len(batch)
		batch = batch[:0:0]
		prog.update(sent, in.n, false)
		return nil
	}
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "//") {
			continue
		}
		r, err := parseRelationshipLine(text, format)
		if err != nil {
			return fmt.Errorf("line %d: %w (nothing was imported)", line, err)
		}
		if batch = append(batch, r); len(batch) == importBatch {
			if err := send(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading line %d: %w (nothing was imported)", line+1, err)
	}
	if err := send(); err != nil {
		return err
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return c.fail("importing", err)
	}
	prog.update(int(resp.GetNumLoaded()), in.n, true)
	fmt.Fprintf(env.Out, "imported %d relationships\n", resp.GetNumLoaded())
	return nil
}

func newExportCommand(env Env) *cobra.Command {
	var flags clientFlags
	var format, output, consistency string
	cmd := &cobra.Command{
		Use:   "export [FILTER]",
		Short: "Write every relationship (or those matching FILTER) out, one a line",
		Long: `Write every relationship, or those matching FILTER (the filter syntax of
"latch relationship read"), one a line, all read at one revision through
ExportBulkRelationships. --format jsonl writes the JSON form of
authzed.api.v1.Relationship; "latch import" reads both formats back.`,
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
	stream, err := c.ExportBulkRelationships(cmd.Context(), req)
	if err != nil {
		return c.fail("exporting", err)
	}
	w := bufio.NewWriter(out)
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
