package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relv1"
)

// A backup written by `latch export` starts with the schema in force at the exported
// revision, so that `latch import` into an empty server restores both. In the text
// format it is a block of comments, which older readers skip:
//
//	// latch export at revision <ZedToken>
//	// schema:
//	//| definition user {}
//
// In the JSONL format it is a first line {"schema": "...", "revision": "<ZedToken>"},
// which no relationship line can be.
const (
	schemaStart  = "// schema:"
	schemaPrefix = "//|"
)

// backupHeader is the JSONL form of the schema block.
type backupHeader struct {
	Schema   string `json:"schema"`
	Revision string `json:"revision"`
}

// writeBackupHeader writes the schema block of a backup at revision token.
func writeBackupHeader(w io.Writer, format, schema, token string) error {
	if format == formatJSONL {
		b, err := json.Marshal(backupHeader{Schema: schema, Revision: token})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "// latch export at revision %s\n%s\n", token, schemaStart)
	for line := range strings.Lines(strings.TrimRight(schema, "\n") + "\n") {
		line = strings.TrimRight(line, "\n")
		if line == "" {
			sb.WriteString(schemaPrefix + "\n")
		} else {
			sb.WriteString(schemaPrefix + " " + line + "\n")
		}
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// jsonlHeader returns the schema of a JSONL header line, or ok false for another line.
func jsonlHeader(line string) (schema string, ok bool, err error) {
	if !strings.HasPrefix(line, "{") {
		return "", false, nil
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal([]byte(line), &keys) != nil || keys["schema"] == nil {
		return "", false, nil
	}
	var h backupHeader
	if err := json.Unmarshal([]byte(line), &h); err != nil {
		return "", false, fmt.Errorf("the backup's schema line: %w", err)
	}
	return h.Schema, true, nil
}

// importer restores a backup: the schema it carries, then its relationships.
type importer struct {
	ctx         context.Context
	c           *client
	format      string
	strategy    conflict
	writeSchema bool
	in          *countingReader
	prog        *progress

	schema        strings.Builder // the backup's schema, as read so far
	inSchema      bool            // reading the text format's schema block
	hasSchema     bool
	schemaWritten bool
	started       bool // the first relationship was read: no schema may follow

	stream  v1.PermissionsService_ImportBulkRelationshipsClient // conflictFail only, opened by the first batch
	batch   []*v1.Relationship
	sent    int // relationships sent so far
	written int // relationships the server wrote
	skipped int // relationships already there (conflictSkip)
}

func (imp *importer) run() error {
	sc := bufio.NewScanner(imp.in)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20) // a JSONL schema line may be long
	line := 0
	for sc.Scan() {
		line++
		if err := imp.line(strings.TrimSpace(sc.Text())); err != nil {
			return fmt.Errorf("line %d: %w%s", line, err, imp.nothingNote())
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading line %d: %w%s", line+1, err, imp.nothingNote())
	}
	if err := imp.restoreSchema(); err != nil {
		return err
	}
	if err := imp.flush(); err != nil {
		return err
	}
	if imp.stream != nil {
		resp, err := imp.stream.CloseAndRecv()
		if err != nil {
			return fmt.Errorf("%w%s", imp.c.fail("importing", err), imp.nothingNote())
		}
		imp.written = int(resp.GetNumLoaded())
	}
	imp.prog.update(imp.written+imp.skipped, imp.in.n, true)
	return nil
}

// nothingNote says what a failure left behind.
func (imp *importer) nothingNote() string {
	switch {
	case imp.strategy != conflictFail && imp.written > 0:
		return fmt.Sprintf(" (%d relationships were written before it)", imp.written)
	case imp.schemaWritten:
		return " (the schema was written; no relationship was)"
	}
	return " (nothing was imported)"
}

// line takes one line of the backup.
func (imp *importer) line(text string) error {
	if !imp.started {
		if done, err := imp.headerLine(text); done || err != nil {
			return err
		}
	}
	if text == "" || strings.HasPrefix(text, "//") {
		return nil
	}
	r, err := parseRelationshipLine(text, imp.format)
	if err != nil {
		return err
	}
	if !imp.started {
		imp.started = true
		if err := imp.restoreSchema(); err != nil {
			return err
		}
	}
	if imp.batch = append(imp.batch, r); len(imp.batch) == importBatch {
		return imp.flush()
	}
	return nil
}

// headerLine takes a line of the schema block, reporting whether it was one.
func (imp *importer) headerLine(text string) (bool, error) {
	if imp.format == formatJSONL {
		schema, ok, err := jsonlHeader(text)
		if ok {
			imp.schema.WriteString(schema)
			imp.hasSchema = true
		}
		return ok, err
	}
	switch {
	case text == schemaStart:
		imp.inSchema, imp.hasSchema = true, true
		return true, nil
	case imp.inSchema && strings.HasPrefix(text, schemaPrefix):
		line := strings.TrimPrefix(strings.TrimPrefix(text, schemaPrefix), " ")
		imp.schema.WriteString(line + "\n")
		return true, nil
	}
	imp.inSchema = false
	return false, nil
}

// restoreSchema writes the backup's schema, once, before its first relationship.
func (imp *importer) restoreSchema() error {
	if !imp.hasSchema || !imp.writeSchema || imp.schemaWritten {
		return nil
	}
	_, err := imp.c.WriteSchema(imp.ctx, &v1.WriteSchemaRequest{Schema: imp.schema.String()})
	if err != nil {
		return fmt.Errorf("%w (nothing was imported; --no-schema imports the relationships under the server's schema)", imp.c.fail("writing the backup's schema", err))
	}
	imp.schemaWritten = true
	return nil
}

// flush sends the batch read so far.
func (imp *importer) flush() error {
	if len(imp.batch) == 0 {
		return nil
	}
	var err error
	switch imp.strategy {
	case conflictFail:
		err = imp.sendImport()
	case conflictTouch:
		err = imp.write(imp.batch, v1.RelationshipUpdate_OPERATION_TOUCH)
	case conflictSkip:
		err = imp.createMissing()
	}
	if err != nil {
		return err
	}
	imp.sent += len(imp.batch)
	imp.batch = imp.batch[:0:0] // the stream may still hold the old array
	imp.prog.update(imp.sent, imp.in.n, false)
	return nil
}

func (imp *importer) sendImport() error {
	if imp.stream == nil {
		s, err := imp.c.ImportBulkRelationships(imp.ctx)
		if err != nil {
			return imp.c.fail("importing", err)
		}
		imp.stream = s
	}
	if err := imp.stream.Send(&v1.ImportBulkRelationshipsRequest{Relationships: imp.batch}); err != nil {
		_, err = imp.stream.CloseAndRecv() // the server's reason, not io.EOF
		return fmt.Errorf("%w%s", imp.c.fail("importing", err), imp.nothingNote())
	}
	return nil
}

// write applies rs with op in one WriteRelationships call.
func (imp *importer) write(rs []*v1.Relationship, op v1.RelationshipUpdate_Operation) error {
	updates := make([]*v1.RelationshipUpdate, len(rs))
	for i, r := range rs {
		updates[i] = &v1.RelationshipUpdate{Operation: op, Relationship: r}
	}
	if _, err := imp.c.WriteRelationships(imp.ctx, &v1.WriteRelationshipsRequest{Updates: updates}); err != nil {
		return err
	}
	imp.written += len(rs)
	return nil
}

// createMissing creates the batch's relationships the server does not hold. It tries
// them all at once; on a conflict it reads which of the batch's resources' relationships
// exist and creates the rest, again if a concurrent writer created one meanwhile.
func (imp *importer) createMissing() error {
	rs := imp.batch
	for attempt := 0; ; attempt++ {
		err := imp.write(rs, v1.RelationshipUpdate_OPERATION_CREATE)
		if status.Code(err) != codes.AlreadyExists || attempt == 3 {
			if err != nil {
				return fmt.Errorf("%w%s", imp.c.fail("importing", err), imp.nothingNote())
			}
			return nil
		}
		if rs, err = imp.missing(rs); err != nil {
			return err
		}
		if len(rs) == 0 {
			return nil
		}
	}
}

// missing returns the relationships of rs the server does not hold, counting the others
// as skipped.
func (imp *importer) missing(rs []*v1.Relationship) ([]*v1.Relationship, error) {
	type resource struct{ typ, id string }
	stored := map[rel.Key]bool{}
	seen := map[resource]bool{}
	for _, r := range rs {
		res := resource{r.GetResource().GetObjectType(), r.GetResource().GetObjectId()}
		if seen[res] {
			continue
		}
		seen[res] = true
		stream, err := imp.c.ReadRelationships(imp.ctx, &v1.ReadRelationshipsRequest{
			Consistency:        &v1.Consistency{Requirement: &v1.Consistency_FullyConsistent{FullyConsistent: true}},
			RelationshipFilter: &v1.RelationshipFilter{ResourceType: res.typ, OptionalResourceId: res.id},
		})
		for err == nil {
			var resp *v1.ReadRelationshipsResponse
			if resp, err = stream.Recv(); err == nil {
				stored[relv1.FromRelationship(resp.GetRelationship()).Key()] = true
			}
		}
		if !errors.Is(err, io.EOF) {
			return nil, imp.c.fail("reading which relationships exist", err)
		}
	}
	var out []*v1.Relationship
	for _, r := range rs {
		if stored[relv1.FromRelationship(r).Key()] {
			imp.skipped++
		} else {
			out = append(out, r)
		}
	}
	return out, nil
}

// summary is the one line that says what the import did.
func (imp *importer) summary() string {
	s := fmt.Sprintf("imported %d relationships", imp.written)
	var parts []string
	if imp.skipped > 0 {
		parts = append(parts, fmt.Sprintf("%d already there, skipped", imp.skipped))
	}
	switch {
	case imp.schemaWritten:
		parts = append(parts, "schema restored")
	case imp.hasSchema:
		parts = append(parts, "the backup's schema not written (--no-schema)")
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, "; ") + ")"
	}
	return s
}
