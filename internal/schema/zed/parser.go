// Package zed parses SpiceDB's schema language (.zed) into the shared syntax tree.
//
// The grammar and operator precedence follow SpiceDB's own parser: `-` (exclusion)
// binds loosest, then `&` (intersection), then `+` (union), all left-associative, so
// `a - b + c` is `a - (b + c)` and `a + b & c - d` is `((a + b) & c) - d`. Arrows
// (`rel->perm`, `rel.any(perm)`, `rel.all(perm)`) bind tighter than every operator
// and take plain identifiers on both sides.
//
// Two deliberate differences make latch more lenient than SpiceDB, never stricter:
// statements need no newline or `;` between them (YAML folding joins lines), and the
// parser recovers after an error at the next statement, so one run reports every
// syntax error with its position.
package zed

import (
	"context"
	"fmt"
	"strings"

	"github.com/latch-authz/latch/internal/schema/ast"
)

// reserved words cannot name definitions, relations, permissions or caveats.
var reserved = map[string]bool{
	"definition": true, "caveat": true, "relation": true, "permission": true, "nil": true, "with": true,
}

// KnownUseFlags are the `use` flags latch accepts.
var KnownUseFlags = []string{"expiration", "typechecking"}

// unsupportedUseFlags are flags SpiceDB knows but latch does not implement; naming
// them gets a clearer message than an unknown flag.
var unsupportedUseFlags = map[string]string{
	"self":    "`self` in permission expressions is not supported by latch",
	"partial": "partials are not supported by latch; expand them into the definitions first",
	"import":  "imports are resolved by `zed schema compile`, not by the server; send the compiled schema",
}

// maxDepth bounds parenthesis nesting so hostile input cannot exhaust the stack.
const maxDepth = ast.MaxNesting

// Parse parses src into a syntax tree. It returns every syntax error it finds, sorted
// by position; the tree holds everything that parsed, so the checker can still report
// its own problems.
func Parse(src string) (*ast.File, []ast.Diagnostic) {
	f, diags, _ := ParseContext(context.Background(), src)
	return f, diags
}

// ParseContext is Parse that gives up when ctx ends, returning ctx's error: a schema
// of megabytes takes a while, and its caller may be gone.
func ParseContext(ctx context.Context, src string) (*ast.File, []ast.Diagnostic, error) {
	p := &parser{file: &ast.File{}, stop: ast.NewStopper(ctx)}
	p.s = newScanner(src, &p.diags)
	p.next()
	p.parseFile()
	if err := p.stop.Err(); err != nil {
		return nil, nil, err
	}
	return p.file, p.diags, nil
}

type parser struct {
	s        *scanner
	tok      token
	diags    []ast.Diagnostic
	file     *ast.File
	seenDecl bool // a definition or caveat was parsed; `use` must come before
	depth    int
	stop     *ast.Stopper
}

// next reads the next token; once the caller's context has ended, every token is the
// end of input, so the parse winds up at once.
func (p *parser) next() {
	if p.stop.Stopped() {
		p.tok = token{kind: tEOF, pos: p.tok.pos}
		return
	}
	p.tok = p.s.next()
}

func (p *parser) errorf(at ast.Pos, format string, args ...any) {
	p.diags = append(p.diags, ast.Diagnostic{Pos: at, Msg: fmt.Sprintf(format, args...)})
}

// unexpected reports that the current token is not what the grammar wants here.
func (p *parser) unexpected(want string) {
	p.errorf(p.tok.pos, "expected %s, found %s", want, p.tok.describe())
}

func (p *parser) isWord(w string) bool { return p.tok.kind == tIdent && p.tok.text == w }

func (p *parser) accept(k tokKind) bool {
	if p.tok.kind != k {
		return false
	}
	p.next()
	return true
}

func (p *parser) expect(k tokKind, what string) bool {
	if p.accept(k) {
		return true
	}
	p.unexpected(what)
	return false
}

func docOf(t token) string { return strings.Join(t.doc, "\n") }

func (p *parser) parseFile() {
	for p.tok.kind != tEOF {
		switch {
		case p.accept(tSemi):
		case p.isWord("use"):
			p.parseUse()
		case p.isWord("definition"):
			p.seenDecl = true
			p.parseDefinition()
		case p.isWord("caveat"):
			p.seenDecl = true
			p.parseCaveat()
		case p.isWord("partial") || p.isWord("import"):
			p.errorf(p.tok.pos, "%s", unsupportedUseFlags[p.tok.text])
			p.next()
			p.syncTop()
		default:
			p.unexpected("`definition`, `caveat` or `use`")
			p.next()
			p.syncTop()
		}
	}
}

// syncTop skips to the next top-level declaration.
func (p *parser) syncTop() {
	for p.tok.kind != tEOF && !p.isWord("definition") && !p.isWord("caveat") {
		p.next()
	}
}

func (p *parser) parseUse() {
	use := &ast.Use{Pos: p.tok.pos}
	p.next()
	if p.tok.kind != tIdent {
		p.unexpected("a use flag")
		p.syncTop()
		return
	}
	use.Flag, use.FlagPos = p.tok.text, p.tok.pos
	p.next()
	switch {
	case unsupportedUseFlags[use.Flag] != "":
		p.errorf(use.FlagPos, "use flag `%s`: %s", use.Flag, unsupportedUseFlags[use.Flag])
		return
	case !knownFlag(use.Flag):
		p.errorf(use.FlagPos, "unknown use flag `%s`; options are: %s", use.Flag, strings.Join(KnownUseFlags, ", "))
		return
	case p.seenDecl:
		p.errorf(use.Pos, "`use` expressions must be declared before any definition or caveat")
		return
	}
	p.file.Uses = append(p.file.Uses, use)
}

func knownFlag(f string) bool {
	for _, k := range KnownUseFlags {
		if k == f {
			return true
		}
	}
	return false
}

// name parses an identifier that names something; what describes it for errors.
func (p *parser) name(what string) (string, ast.Pos, bool) {
	if p.tok.kind != tIdent {
		p.unexpected(what)
		return "", p.tok.pos, false
	}
	if reserved[p.tok.text] {
		p.errorf(p.tok.pos, "expected %s, found keyword `%s`", what, p.tok.text)
		return "", p.tok.pos, false
	}
	n, at := p.tok.text, p.tok.pos
	p.next()
	return n, at, true
}

// typePath parses `name` or `prefix/name` (prefixes may nest).
func (p *parser) typePath(what string) (string, ast.Pos, bool) {
	first, at, ok := p.name(what)
	if !ok {
		return "", at, false
	}
	parts := []string{first}
	for p.accept(tSlash) {
		seg, _, ok := p.name(what)
		if !ok {
			return "", at, false
		}
		parts = append(parts, seg)
	}
	return strings.Join(parts, "/"), at, true
}
