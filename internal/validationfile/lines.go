package validationfile

import (
	"strings"

	"gopkg.in/yaml.v3"
)

// A position names a place in a file for messages; Line 0 means "somewhere in File".
type position struct {
	File      string
	Line, Col int
}

// locator maps byte offsets in a decoded YAML scalar back to lines of the file it came
// from, so that problems in schema text or relationships name the line a person edits.
//
// Block scalars (`|`, `>-`, ...) only ever change whitespace when YAML decodes them:
// indentation is stripped and folding turns line breaks into spaces, but the sequence
// of whitespace-separated words is identical in the source and in the value. So the
// n-th word of the value is the n-th word after the block's indicator line, whatever
// the style. Other scalars (plain, quoted) are located at their first line only,
// because escapes and folding there can change more than whitespace.
type locator struct {
	file  string
	value string
	// block is the source text following the indicator line, for block scalars;
	// firstLine is its first line's number. For other scalars block is "" and
	// firstLine is the scalar's own line.
	block     string
	firstLine int
}

// newLocator returns a locator for node, which was decoded from src.
func newLocator(file string, src []byte, node *yaml.Node) locator {
	l := locator{file: file, value: node.Value, firstLine: node.Line}
	if node.Style&(yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
		return l
	}
	lines := strings.SplitAfter(string(src), "\n")
	if node.Line >= len(lines) {
		return l
	}
	l.block = strings.Join(lines[node.Line:], "")
	l.firstLine = node.Line + 1
	return l
}

// identityLocator locates offsets of a whole file's text (a schemaFile).
func identityLocator(file, text string) locator {
	return locator{file: file, value: text, block: text, firstLine: 1}
}

// at returns the position of byte offset off in the value.
func (l locator) at(off int) position {
	if l.block == "" {
		return position{File: l.file, Line: l.firstLine}
	}
	word, inWord := wordIndex(l.value, off)
	line, col, ok := nthWord(l.block, word)
	if !ok {
		return position{File: l.file, Line: l.firstLine}
	}
	return position{File: l.file, Line: l.firstLine + line, Col: col + inWord}
}

// atLineCol returns the position of a 1-based line and byte column in the value.
func (l locator) atLineCol(line, col int) position {
	off := 0
	for i := 1; i < line; i++ {
		nl := strings.IndexByte(l.value[off:], '\n')
		if nl < 0 {
			off = len(l.value)
			break
		}
		off += nl + 1
	}
	return l.at(min(off+max(col-1, 0), len(l.value)))
}

// wordIndex returns which whitespace-separated word of s holds offset off (the next
// word when off is on whitespace, the end of the last word when off is past them all)
// and how far into that word off is.
func wordIndex(s string, off int) (word, inWord int) {
	word = -1
	start, end := 0, 0
	for i := 0; i < len(s); {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) {
			break
		}
		word, start = word+1, i
		for i < len(s) && !isSpace(s[i]) {
			i++
		}
		end = i
		if off < end {
			return word, max(off-start, 0)
		}
	}
	if word < 0 {
		return 0, 0
	}
	return word, end - start
}

// isSpace is YAML's notion of whitespace inside a scalar (space, tab, line breaks).
func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// nthWord returns the 0-based line and 1-based column of word n of s.
func nthWord(s string, n int) (line, col int, ok bool) {
	word := -1
	inside := false
	lineStart := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			line++
			lineStart = i + 1
		}
		space := isSpace(s[i])
		if !space && !inside {
			word++
			if word == n {
				return line, i - lineStart + 1, true
			}
		}
		inside = !space
	}
	return 0, 0, false
}
