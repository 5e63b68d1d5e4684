package perm

import (
	"fmt"

	"github.com/latch-authz/latch/internal/schema/ast"
)

type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tAt
	tHash
	tDot
	tComma
	tLParen
	tRParen
	tLBrace
	tRBrace
	tLBrack
	tRBrack
	tEq
	tIllegal
)

var tokNames = [...]string{
	tEOF: "end of input", tIdent: "identifier", tAt: "`@`", tHash: "`#`", tDot: "`.`",
	tComma: "`,`", tLParen: "`(`", tRParen: "`)`", tLBrace: "`{`", tRBrace: "`}`",
	tLBrack: "`[`", tRBrack: "`]`", tEq: "`=`", tIllegal: "illegal character",
}

type token struct {
	kind tokKind
	text string
	pos  ast.Pos
	off  int // byte offset of the token's first character
}

func (t token) describe() string {
	if t.kind == tIdent {
		return fmt.Sprintf("`%s`", t.text)
	}
	if t.kind == tIllegal {
		return fmt.Sprintf("illegal character %q", t.text)
	}
	return tokNames[t.kind]
}

// lexer produces tokens on demand, so the parser can take a rule's CEL body as raw text.
// Newlines are not significant: Permify statements start with keywords, so schema text
// whose lines were folded together still parses.
type lexer struct {
	src       string
	off       int
	line, col int
	diags     []ast.Diagnostic
}

func newLexer(src string) *lexer { return &lexer{src: src, line: 1, col: 1} }

func (l *lexer) pos() ast.Pos { return ast.Pos{Line: l.line, Col: l.col} }

func (l *lexer) advance(n int) {
	for i := 0; i < n && l.off < len(l.src); i++ {
		if l.src[l.off] == '\n' {
			l.line++
			l.col = 1
		} else {
			l.col++
		}
		l.off++
	}
}

// skipSpace skips blanks and comments; an unterminated block comment is reported.
func (l *lexer) skipSpace() {
	for l.off < len(l.src) {
		c := l.src[l.off]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			l.advance(1)
		case c == '/' && l.peekByte(1) == '/':
			for l.off < len(l.src) && l.src[l.off] != '\n' {
				l.advance(1)
			}
		case c == '/' && l.peekByte(1) == '*':
			start := l.pos()
			l.advance(2)
			for l.off < len(l.src) && !(l.src[l.off] == '*' && l.peekByte(1) == '/') {
				l.advance(1)
			}
			if l.off >= len(l.src) {
				l.diags = append(l.diags, ast.Diagnostic{Pos: start, Msg: "unterminated block comment: close it with `*/`"})
				return
			}
			l.advance(2)
		default:
			return
		}
	}
}

func (l *lexer) peekByte(ahead int) byte {
	if l.off+ahead < len(l.src) {
		return l.src[l.off+ahead]
	}
	return 0
}

var punct = map[byte]tokKind{
	'@': tAt, '#': tHash, '.': tDot, ',': tComma, '(': tLParen, ')': tRParen,
	'{': tLBrace, '}': tRBrace, '[': tLBrack, ']': tRBrack, '=': tEq,
}

func isIdentStart(c byte) bool { return c == '_' || (c|0x20) >= 'a' && (c|0x20) <= 'z' }
func isIdentByte(c byte) bool  { return isIdentStart(c) || c >= '0' && c <= '9' }

func (l *lexer) next() token {
	l.skipSpace()
	t := token{pos: l.pos(), off: l.off}
	if l.off >= len(l.src) {
		t.kind = tEOF
		return t
	}
	c := l.src[l.off]
	if k, ok := punct[c]; ok {
		t.kind, t.text = k, string(c)
		l.advance(1)
		return t
	}
	if isIdentByte(c) {
		end := l.off
		for end < len(l.src) && isIdentByte(l.src[end]) {
			end++
		}
		t.kind, t.text = tIdent, l.src[l.off:end]
		l.advance(end - l.off)
		return t
	}
	// One illegal rune, whole, so the message shows what was written.
	n := 1
	for l.off+n < len(l.src) && l.src[l.off+n]&0xC0 == 0x80 {
		n++
	}
	t.kind, t.text = tIllegal, l.src[l.off:l.off+n]
	l.advance(n)
	return t
}

// rawBlock reads a rule's CEL body after its opening `{`: everything up to the matching
// `}`, skipping braces inside string literals. It returns the body, where the body's
// first character is, and whether the closing brace was found.
func (l *lexer) rawBlock() (string, ast.Pos, bool) {
	start, startPos := l.off, l.pos()
	depth := 0
	var quote byte
	for l.off < len(l.src) {
		c := l.src[l.off]
		switch {
		case quote != 0:
			if c == '\\' {
				l.advance(1)
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '{':
			depth++
		case c == '}':
			if depth == 0 {
				body := l.src[start:l.off]
				l.advance(1)
				return body, startPos, true
			}
			depth--
		}
		l.advance(1)
	}
	return l.src[start:], startPos, false
}
