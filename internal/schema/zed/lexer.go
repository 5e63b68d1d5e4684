package zed

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/latch-authz/latch/internal/schema/ast"
)

type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tLBrace
	tRBrace
	tLParen
	tRParen
	tPipe
	tPlus
	tMinus
	tAmp
	tSlash
	tEquals
	tColon
	tSemi
	tArrow
	tHash
	tEllipsis
	tStar
	tDot
	tComma
	tLess
	tGreater
	tString
)

var tokNames = map[tokKind]string{
	tEOF: "end of input", tIdent: "identifier", tLBrace: "`{`", tRBrace: "`}`", tLParen: "`(`",
	tRParen: "`)`", tPipe: "`|`", tPlus: "`+`", tMinus: "`-`", tAmp: "`&`", tSlash: "`/`",
	tEquals: "`=`", tColon: "`:`", tSemi: "`;`", tArrow: "`->`", tHash: "`#`", tEllipsis: "`...`",
	tStar: "`*`", tDot: "`.`", tComma: "`,`", tLess: "`<`", tGreater: "`>`", tString: "string",
}

func (k tokKind) String() string { return tokNames[k] }

// token is one lexeme. doc holds the comments that precede it on their own lines,
// which become the doc comment of the statement the token starts.
type token struct {
	kind tokKind
	text string
	pos  ast.Pos
	doc  []string
}

// describe names a token for error messages: keywords and identifiers by their text.
func (t token) describe() string {
	switch t.kind {
	case tIdent:
		return fmt.Sprintf("`%s`", t.text)
	case tString:
		return "string " + t.text
	}
	return t.kind.String()
}

// scanner turns source into tokens on demand, so the parser can switch to reading a
// caveat's CEL body as raw text.
type scanner struct {
	src       string
	off       int
	line, col int
	prevLine  int // line where the previous token ended; 0 before the first token
	diags     *[]ast.Diagnostic
}

func newScanner(src string, diags *[]ast.Diagnostic) *scanner {
	return &scanner{src: src, line: 1, col: 1, diags: diags}
}

func (s *scanner) pos() ast.Pos { return ast.Pos{Line: s.line, Col: s.col} }

func (s *scanner) errorf(p ast.Pos, format string, args ...any) {
	*s.diags = append(*s.diags, ast.Diagnostic{Pos: p, Msg: fmt.Sprintf(format, args...)})
}

// peekRune returns the rune at the cursor and its width (0 at end of input).
func (s *scanner) peekRune() (rune, int) {
	if s.off >= len(s.src) {
		return -1, 0
	}
	return utf8.DecodeRuneInString(s.src[s.off:])
}

// advance moves the cursor over n bytes, keeping line and column (in runes) current.
func (s *scanner) advance(n int) {
	end := min(s.off+n, len(s.src))
	for s.off < end {
		r, w := utf8.DecodeRuneInString(s.src[s.off:])
		s.off += w
		if r == '\n' {
			s.line++
			s.col = 1
		} else {
			s.col++
		}
	}
}

func (s *scanner) hasPrefix(p string) bool { return strings.HasPrefix(s.src[s.off:], p) }

// next returns the next token, skipping whitespace and collecting comments.
func (s *scanner) next() token {
	doc := s.skipSpaceAndComments()
	start := s.pos()
	r, w := s.peekRune()
	if w == 0 {
		return token{kind: tEOF, pos: start, doc: doc}
	}
	if isIdentRune(r) {
		from := s.off
		for r, w := s.peekRune(); w > 0 && isIdentRune(r); r, w = s.peekRune() {
			s.advance(w)
		}
		return s.finish(token{kind: tIdent, text: s.src[from:s.off], pos: start, doc: doc})
	}
	if r == '"' || r == '\'' {
		return s.finish(s.scanString(start, doc))
	}
	kind, n := punct(s.src[s.off:])
	if n == 0 {
		s.errorf(start, "unrecognized character %q", r)
		s.advance(w)
		return s.next()
	}
	text := s.src[s.off : s.off+n]
	s.advance(n)
	return s.finish(token{kind: kind, text: text, pos: start, doc: doc})
}

func (s *scanner) finish(t token) token {
	s.prevLine = s.line
	return t
}

var singlePunct = map[byte]tokKind{
	'{': tLBrace, '}': tRBrace, '(': tLParen, ')': tRParen, '|': tPipe, '+': tPlus,
	'-': tMinus, '&': tAmp, '/': tSlash, '=': tEquals, ':': tColon, ';': tSemi,
	'#': tHash, '*': tStar, '.': tDot, ',': tComma, '<': tLess, '>': tGreater,
}

// punct matches the longest punctuation token at the start of src.
func punct(src string) (tokKind, int) {
	switch {
	case strings.HasPrefix(src, "->"):
		return tArrow, 2
	case strings.HasPrefix(src, "..."):
		return tEllipsis, 3
	}
	if k, ok := singlePunct[src[0]]; ok {
		return k, 1
	}
	return tEOF, 0
}

// scanString reads a quoted string (used by nothing in the grammar today but lexed
// whole so a stray one yields one clear error rather than many).
func (s *scanner) scanString(start ast.Pos, doc []string) token {
	from := s.off
	quote := s.src[s.off]
	s.advance(1)
	for {
		r, w := s.peekRune()
		switch {
		case w == 0 || r == '\n':
			s.errorf(start, "unterminated string")
			return token{kind: tString, text: s.src[from:s.off], pos: start, doc: doc}
		case r == '\\':
			s.advance(w)
			_, w2 := s.peekRune()
			s.advance(w2)
		case byte(r) == quote:
			s.advance(w)
			return token{kind: tString, text: s.src[from:s.off], pos: start, doc: doc}
		default:
			s.advance(w)
		}
	}
}

// skipSpaceAndComments skips to the next token and returns the comments that stand
// on their own lines (a comment after code on the same line belongs to that code).
func (s *scanner) skipSpaceAndComments() []string {
	var doc []string
	for {
		r, w := s.peekRune()
		switch {
		case w == 0:
			return doc
		case unicode.IsSpace(r):
			s.advance(w)
		case s.hasPrefix("//") || s.hasPrefix("/*"):
			trailing := s.prevLine == s.line
			text := s.scanComment()
			if !trailing {
				doc = append(doc, text)
			}
		default:
			return doc
		}
	}
}

// scanComment reads one comment and returns it with each line trimmed, as SpiceDB
// normalizes the comments it keeps.
func (s *scanner) scanComment() string {
	start, from := s.pos(), s.off
	if s.hasPrefix("//") {
		end := strings.IndexByte(s.src[s.off:], '\n')
		if end < 0 {
			end = len(s.src) - s.off
		}
		s.advance(end)
		return strings.TrimSpace(s.src[from:s.off])
	}
	end := strings.Index(s.src[s.off+2:], "*/")
	if end < 0 {
		s.errorf(start, "unterminated multiline comment")
		s.advance(len(s.src) - s.off)
	} else {
		s.advance(end + 4)
	}
	lines := strings.Split(s.src[from:s.off], "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, "\n")
}

func isIdentRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// scanCEL reads a caveat body: the raw text up to the `}` that closes the `{` just
// consumed, honouring nested braces (CEL map literals), string literals and comments
// that may themselves contain braces. It returns the body with surrounding
// whitespace trimmed and where that trimmed body starts; ok is false when input ends
// first.
func (s *scanner) scanCEL() (body string, at ast.Pos, ok bool) {
	from, fromPos := s.off, s.pos()
	depth := 1
	for {
		r, w := s.peekRune()
		switch {
		case w == 0:
			return "", fromPos, false
		case r == '{':
			depth++
			s.advance(w)
		case r == '}':
			depth--
			if depth == 0 {
				raw := s.src[from:s.off]
				s.advance(w)
				s.prevLine = s.line
				return trimmedBody(raw, fromPos)
			}
			s.advance(w)
		case r == '"' || r == '\'':
			s.skipCELString(false)
		case isIdentRune(r):
			s.skipCELIdent()
		case s.hasPrefix("//"):
			s.scanComment()
		default:
			s.advance(w)
		}
	}
}

// skipCELIdent skips an identifier; a string prefix (r, b, rb, br in any case)
// directly followed by a quote starts a string, raw when the prefix has an r.
func (s *scanner) skipCELIdent() {
	from := s.off
	for r, w := s.peekRune(); w > 0 && isIdentRune(r); r, w = s.peekRune() {
		s.advance(w)
	}
	word := strings.ToLower(s.src[from:s.off])
	if r, _ := s.peekRune(); (r == '"' || r == '\'') && isStringPrefix(word) {
		s.skipCELString(strings.Contains(word, "r"))
	}
}

func isStringPrefix(w string) bool {
	switch w {
	case "r", "b", "rb", "br":
		return true
	}
	return false
}

// skipCELString skips a CEL string literal: single or triple quoted, with backslash
// escapes unless raw. An unterminated string runs to the end of input.
func (s *scanner) skipCELString(raw bool) {
	quote := s.src[s.off : s.off+1]
	if s.hasPrefix(strings.Repeat(quote, 3)) {
		quote = strings.Repeat(quote, 3)
	}
	s.advance(len(quote))
	for {
		r, w := s.peekRune()
		switch {
		case w == 0:
			return
		case len(quote) == 1 && r == '\n':
			return
		case r == '\\' && !raw:
			s.advance(w)
			_, w2 := s.peekRune()
			s.advance(w2)
		case s.hasPrefix(quote):
			s.advance(len(quote))
			return
		default:
			s.advance(w)
		}
	}
}

// trimmedBody trims raw and computes the position of its first kept character.
func trimmedBody(raw string, at ast.Pos) (string, ast.Pos, bool) {
	lead := raw[:len(raw)-len(strings.TrimLeftFunc(raw, unicode.IsSpace))]
	for _, r := range lead {
		if r == '\n' {
			at.Line++
			at.Col = 1
		} else {
			at.Col++
		}
	}
	return strings.TrimSpace(raw), at, true
}
