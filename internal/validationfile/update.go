package validationfile

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// RenderValidation renders computed entries as a `validation:` section, the way zed's
// tooling generates one: entries sorted by key, each entry's subjects sorted, `[]` for
// an entry that reaches no subject. An entry that could not be computed is an error.
func RenderValidation(results []RelationResult) (string, error) {
	var errs []error
	for _, r := range results {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.Expected.Key, r.Err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	sorted := slices.Clone(results)
	slices.SortFunc(sorted, func(a, b RelationResult) int { return strings.Compare(a.Expected.Key, b.Expected.Key) })
	var b strings.Builder
	b.WriteString("validation:")
	if len(sorted) == 0 {
		b.WriteString(" {}")
	}
	b.WriteByte('\n')
	for _, r := range sorted {
		writeKey(&b, r.Expected.Key)
		if len(r.Found) == 0 {
			b.WriteString(" []\n")
			continue
		}
		b.WriteByte('\n')
		for _, f := range r.Found {
			// A Go-quoted string is a valid YAML double-quoted scalar: YAML knows
			// every escape strconv.Quote writes.
			fmt.Fprintf(&b, "    - %s\n", strconv.Quote(f.String()))
		}
	}
	return b.String(), nil
}

// maxImplicitKey is the longest key YAML allows without an explicit `? ` marker;
// object ids may be up to 1024 bytes, so `type:id#permission` can be longer.
const maxImplicitKey = 1024

// writeKey writes an entry's key, up to its colon: plainly when YAML reads it back
// unchanged, quoted otherwise, and as an explicit `? key` when it is too long to be
// an implicit one.
func writeKey(b *strings.Builder, k string) {
	text := strconv.Quote(k)
	if out, err := yaml.Marshal(k); err == nil {
		text = strings.TrimSuffix(string(out), "\n")
	}
	if len(text) > maxImplicitKey {
		fmt.Fprintf(b, "  ? %s\n  :", text)
		return
	}
	fmt.Fprintf(b, "  %s:", text)
}

// UpdateValidation returns src with its `validation` section replaced by the rendering
// of results (RenderValidation); every other byte of src is kept. The section runs
// from its key to the last line before the next top-level key, leaving out the blank
// lines and unindented comments that precede that key. A file without the section,
// or without entries in it, is returned unchanged.
func UpdateValidation(src []byte, results []RelationResult) ([]byte, error) {
	if len(results) == 0 {
		return src, nil
	}
	section, err := RenderValidation(results)
	if err != nil {
		return nil, err
	}
	first, last, ok, err := validationLines(src)
	if err != nil || !ok {
		return src, err
	}
	lines := bytes.SplitAfter(src, []byte("\n"))
	for last > first && isBlankOrComment(lines[last-1]) {
		last--
	}
	if !bytes.HasSuffix(lines[last-1], []byte("\n")) {
		section = strings.TrimSuffix(section, "\n")
	}
	var out bytes.Buffer
	out.Grow(len(src) + len(section))
	for _, l := range lines[:first-1] {
		out.Write(l)
	}
	out.WriteString(section)
	for _, l := range lines[last:] {
		out.Write(l)
	}
	return out.Bytes(), nil
}

// validationLines returns the 1-based first line of the top-level `validation` key and
// the last line before the next top-level key (or the file's last line).
func validationLines(src []byte) (first, last int, ok bool, err error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return 0, 0, false, err
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return 0, 0, false, nil
	}
	top := doc.Content[0]
	if top.Style&yaml.FlowStyle != 0 {
		return 0, 0, false, errors.New("the file is a flow-style mapping ({...}); write it in block style to update its validation section")
	}
	last = bytes.Count(src, []byte("\n"))
	if !bytes.HasSuffix(src, []byte("\n")) {
		last++
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k := top.Content[i]
		if ok {
			return first, k.Line - 1, true, nil
		}
		if k.Value == "validation" {
			first, ok = k.Line, true
		}
	}
	return first, last, ok, nil
}

// isBlankOrComment reports whether a line is blank or a comment starting in column 1.
func isBlankOrComment(l []byte) bool {
	t := bytes.TrimRight(l, " \t\r\n")
	return len(t) == 0 || t[0] == '#'
}
