package playground

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/latch-authz/latch/internal/validationfile"
)

// failure is one problem of a validation run, under the editor line it came from
// (Editor "" when it has no line of its own).
type failure struct {
	Editor  string `json:"editor"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

type validation struct {
	// Checked counts the assertions and expected relations (or Permify expectations)
	// evaluated.
	Checked  int       `json:"checked"`
	Failures []failure `json:"failures"`
	// Expected is the validation section rewritten from the actual answers, as
	// `latch validate --update` writes it; "" when it could not be computed.
	Expected string `json:"expected"`
}

// validate runs the page as a validation file, as `latch validate` would run the
// file /api/export writes.
func (h *Handler) validate(r *http.Request, req *request) (any, error) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	lang, err := h.bounded(req)
	if err != nil {
		return nil, err
	}
	out := validation{Failures: []failure{}}
	if lang == permify {
		err = out.runPermify(ctx, req)
	} else {
		err = out.runSpiceDB(ctx, req)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, err
}

// bounded applies a session's limits to a request that runs on a store of its own,
// and returns its schema language.
func (h *Handler) bounded(req *request) (string, error) {
	n := 0
	for _, l := range strings.Split(req.Relationships, "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	if n > h.cfg.MaxRelationships {
		return "", &requestError{fmt.Sprintf("%d relationship lines: the playground holds at most %d relationships", n, h.cfg.MaxRelationships)}
	}
	return language(req)
}

func (v *validation) runSpiceDB(ctx context.Context, req *request) error {
	c := composeSpiceDB(req)
	f, err := validationfile.Parse(fileName, []byte(c.text.String()))
	if err != nil {
		return v.problems(c, err)
	}
	rep, err := validationfile.Run(ctx, f)
	if err != nil {
		return v.problems(c, err)
	}
	v.Checked = len(rep.Assertions) + len(rep.Relations)
	v.failures(c, rep.Failures)
	if len(rep.Relations) > 0 {
		if section, err := validationfile.RenderValidation(rep.Relations); err == nil {
			v.Expected = sectionBody(section)
		}
	}
	return nil
}

// sectionBody returns what goes under a rendered `validation:` key, as the editor
// holds it: the entries, dedented.
func sectionBody(section string) string {
	_, body, _ := strings.Cut(section, "\n")
	lines := strings.Split(strings.TrimRight(body, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "  ")
	}
	return strings.Join(lines, "\n")
}

func (v *validation) failures(c *composed, fs []validationfile.Failure) {
	for _, f := range fs {
		v.add(c, f.Line, f.What+": "+f.Msg)
	}
}

func (v *validation) runPermify(ctx context.Context, req *request) error {
	c := composePermify(req)
	f, err := validationfile.ParsePermify(fileName, []byte(c.text.String()))
	if err != nil {
		return v.problems(c, err)
	}
	rep, err := validationfile.RunPermify(ctx, f)
	if err != nil {
		return v.problems(c, err)
	}
	v.Checked = rep.Checked
	v.failures(c, rep.Failures)
	return nil
}

// problems records why the file could not be run, each at its editor line.
func (v *validation) problems(c *composed, err error) error {
	var pe *validationfile.ProblemsError
	if !errors.As(err, &pe) {
		return err
	}
	for _, p := range pe.Problems {
		v.add(c, p.Line, p.Msg)
	}
	return nil
}

func (v *validation) add(c *composed, fileLine int, msg string) {
	editor, line := c.locate(fileLine)
	v.Failures = append(v.Failures, failure{Editor: editor, Line: line, Message: msg})
}

type exported struct {
	Name string `json:"name"`
	YAML string `json:"yaml"`
}

// export writes the page as a validation file: SpiceDB's format, or Permify's when
// the schema is in Permify's language.
func (h *Handler) export(_ *http.Request, req *request) (any, error) {
	lang, err := h.bounded(req)
	if err != nil {
		return nil, err
	}
	c := composeSpiceDB(req)
	if lang == permify {
		c = composePermify(req)
	}
	return exported{Name: fileName, YAML: c.text.String()}, nil
}

// importFile splits a validation file into the page's editors.
func (h *Handler) importFile(_ *http.Request, req *request) (any, error) {
	return decompose(req.File)
}
