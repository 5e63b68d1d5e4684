package playground

import (
	"context"
	"strings"

	"github.com/latch-authz/latch/internal/permdata"
	"github.com/latch-authz/latch/internal/store"
)

// attributeLine is a Permify attribute (`document:readme$is_public|boolean:true`) on a
// line of the relationships editor.
type attributeLine struct {
	line int
	attr permdata.Attribute
}

// isAttribute says whether a relationships line is a Permify attribute: in Permify's
// language, an entity and `$name` where a relationship has `#relation@subject`.
func isAttribute(lang, line string) bool {
	obj, _, ok := strings.Cut(line, "$")
	return lang == permify && ok && !strings.ContainsAny(obj, "#@")
}

// writeAttributes writes each attribute in a write of its own, after the
// relationships at rev, as `latch validate` and a Permify client do (a rule's
// arguments are read from the values written before), and records at its line each
// one the schema refuses. It returns the revision the last write made.
func (w *workspace) writeAttributes(ctx context.Context, attrs []attributeLine, rev store.Revision) (store.Revision, error) {
	ps := permdata.NewSchema(w.schema)
	for _, a := range attrs {
		r, err := w.store.Reader(ctx, rev)
		if err != nil {
			return rev, err
		}
		var b permdata.Batch
		if err := ps.AttributeUpdates(ctx, r, []permdata.Attribute{a.attr}, &b); err != nil {
			w.relationships = append(w.relationships, diagnostic{Line: a.line, Message: "attribute: " + err.Error(), Severity: "error"})
			continue
		}
		if len(b.Updates) == 0 {
			continue
		}
		if rev, err = w.store.Write(ctx, nil, b.Updates, nil); err != nil {
			return rev, err
		}
	}
	return rev, nil
}
