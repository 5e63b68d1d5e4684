package memory

import (
	"slices"
	"sort"
	"strings"
)

// chunkMax bounds the chunks of an idList: inserting moves at most this many symbols,
// and the chunk directory is this many times shorter than the list.
const chunkMax = 512

// idList is a set of symbols kept sorted by their strings, in chunks (a two-level
// B-tree), so that scans can walk a type's resource ids in key order and resume from
// any id, while inserts stay cheap on lists of millions.
type idList struct {
	chunks [][]sym // each sorted and non-empty
	n      int
}

func (l *idList) len() int { return l.n }

// seek returns the position of the first id whose string is >= key.
func (l *idList) seek(in *interner, key string) (c, i int) {
	c = sort.Search(len(l.chunks), func(j int) bool {
		ch := l.chunks[j]
		return in.str(ch[len(ch)-1]) >= key
	})
	if c == len(l.chunks) {
		return c, 0
	}
	ch := l.chunks[c]
	i = sort.Search(len(ch), func(j int) bool { return in.str(ch[j]) >= key })
	return c, i
}

// at returns the id at a position and whether the position is inside the list.
func (l *idList) at(c, i int) (sym, bool) {
	if c >= len(l.chunks) {
		return 0, false
	}
	return l.chunks[c][i], true
}

// step returns the position after (c, i).
func (l *idList) step(c, i int) (int, int) {
	if i+1 < len(l.chunks[c]) {
		return c, i + 1
	}
	return c + 1, 0
}

// insert adds id if it is not present.
func (l *idList) insert(in *interner, id sym) {
	key := in.str(id)
	c, i := l.seek(in, key)
	if c == len(l.chunks) {
		if c == 0 {
			l.chunks = append(l.chunks, []sym{id})
			l.n++
			return
		}
		c--
		i = len(l.chunks[c])
	} else if l.chunks[c][i] == id {
		return
	}
	l.chunks[c] = slices.Insert(l.chunks[c], i, id)
	l.n++
	if ch := l.chunks[c]; len(ch) > chunkMax {
		half := len(ch) / 2
		right := slices.Clone(ch[half:])
		l.chunks[c] = slices.Clip(ch[:half])
		l.chunks = slices.Insert(l.chunks, c+1, right)
	}
}

// remove deletes id if it is present.
func (l *idList) remove(in *interner, id sym) {
	c, i := l.seek(in, in.str(id))
	if c == len(l.chunks) || l.chunks[c][i] != id {
		return
	}
	l.chunks[c] = slices.Delete(l.chunks[c], i, i+1)
	l.n--
	if len(l.chunks[c]) == 0 {
		l.chunks = slices.Delete(l.chunks, c, c+1)
	}
}

// hasPrefix reports whether the id at a position starts with prefix.
func (l *idList) hasPrefix(in *interner, c, i int, prefix string) bool {
	return strings.HasPrefix(in.str(l.chunks[c][i]), prefix)
}
