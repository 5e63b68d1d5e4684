package materialize

import (
	"slices"

	"github.com/latch-authz/latch/internal/store"
)

// States of a set in upward's walk (scratch.state), and the flag of one that met a set
// still on the walk's path among its parents: a cycle, below which the parents'
// ancestors are not final when the set's turn comes.
const (
	walkOnPath = 1
	walkDone   = 2
	walkCycle  = 4
)

// updateAncestors recomputes the ancestors of the sets of region (closed downwards:
// every set below one of them is in it) and pushes those that changed. Parents come
// first, so a set's ancestors are its parents' merged, each a hop further; a walk up
// from the set (ancestors) is needed only below a cycle, for a set of many parents
// and below a parent whose list was dropped.
func (st *state) updateAncestors(region []uint32, rev store.Revision) {
	var m ancMerge
	for _, id := range st.upward(region) {
		n := st.node(id)
		if n.dropped {
			continue
		}
		anc, ok := []uint64(nil), false
		if st.scratch.state[id]&walkCycle == 0 {
			anc, ok = m.merged(st, id)
		}
		if !ok {
			anc = st.ancestors(id)
		}
		st.setAncestors(id, n, anc, rev)
	}
}

// setAncestors makes anc set id's ancestors from rev when they changed, or drops them
// past the memory bound.
func (st *state) setAncestors(id uint32, n *node, anc []uint64, rev store.Revision) {
	sn := st.setOf(id)
	cur, _ := sn.anc.current()
	if slices.Equal(anc, cur) {
		return
	}
	if !st.fits(ids64Bytes(anc)) {
		st.entries.Add(-int64(len(cur)))
		st.drop(id, n)
		return
	}
	st.entries.Add(int64(len(anc) - len(cur)))
	delta, superseded := sn.anc.push(rev, anc, false, ids64Bytes)
	st.grow(delta, true)
	if superseded {
		st.queue = append(st.queue, pruneItem{rev, id, slotAnc})
	}
}

// upward returns the sets of region parents first (each set after those of its
// parents in region, a depth-first walk up), leaving each set's walk state in
// scratch.state, walkCycle set on a set one of whose parents was still on the path
// (a cycle) when the walk met it.
func (st *state) upward(region []uint32) []uint32 {
	sc := st.begin()
	for _, id := range region {
		sc.mark[id], sc.state[id] = sc.epoch, 0
	}
	order := make([]uint32, 0, len(region))
	var stack []uint64 // id<<32 | the index of the next parent to visit
	for _, root := range region {
		if sc.state[root] != 0 {
			continue
		}
		sc.state[root] = walkOnPath
		stack = append(stack[:0], uint64(root)<<32)
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			id, i := uint32(*top>>32), uint32(*top)
			ps, _ := st.node(id).parents.current()
			if int(i) == len(ps) {
				sc.state[id] = sc.state[id]&walkCycle | walkDone
				order = append(order, id)
				stack = stack[:len(stack)-1]
				continue
			}
			*top++
			p := ps[i]
			if sc.mark[p] != sc.epoch {
				continue // outside region: its ancestors did not change
			}
			switch sc.state[p] & 3 {
			case 0:
				sc.state[p] = walkOnPath
				stack = append(stack, uint64(p)<<32)
			case walkOnPath:
				sc.state[id] |= walkCycle
			}
		}
	}
	return order
}

// mergeParentsMax bounds the parents whose ancestors merged merges, one pass each: a
// set with more is walked up from (ancestors), which costs no more than its parents'
// lists once.
const mergeParentsMax = 16

// ancMerge merges parents' ancestors, in buffers kept from one set to the next.
type ancMerge struct{ a, b, c []uint64 }

// merged returns set id's ancestors from its parents' current ones: each parent at one
// hop, and each parent's ancestors a hop further than from the parent, the fewest
// hops of each kept, id itself left out (a cycle leads back to it). False when a
// parent's ancestors are not held (dropped).
func (m *ancMerge) merged(st *state, id uint32) ([]uint64, bool) {
	ps, _ := st.node(id).parents.current()
	if len(ps) == 0 {
		return nil, true
	}
	if len(ps) > mergeParentsMax {
		return nil, false
	}
	m.a = m.a[:0]
	for _, p := range ps {
		anc, ok := st.setOf(p).anc.current()
		if !ok {
			return nil, false
		}
		m.b = lift(m.b[:0], p, anc)
		m.c = mergeFewest(m.c[:0], m.a, m.b)
		m.a, m.c = m.c, m.a
	}
	out := make([]uint64, 0, len(m.a))
	for _, e := range m.a {
		if uint32(e>>8) != id {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil, true
	}
	return out, true
}

// lift appends to dst the ancestors of a set through parent p, whose own are anc:
// p at one hop, and each of anc a hop further (at most 255), sorted by set.
func lift(dst []uint64, p uint32, anc []uint64) []uint64 {
	self := uint64(p)<<8 | 1
	placed := false
	for _, e := range anc {
		if !placed && e>>8 >= uint64(p) {
			dst, placed = append(dst, self), true
			if e>>8 == uint64(p) {
				continue // p among its own ancestors (a cycle): one hop is fewer
			}
		}
		if e&0xff < 255 {
			e++
		}
		dst = append(dst, e)
	}
	if !placed {
		dst = append(dst, self)
	}
	return dst
}

// mergeFewest appends to dst the union of a and b (each sorted by set, a set at most
// once), with the fewest hops of a set in both.
func mergeFewest(dst, a, b []uint64) []uint64 {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch x, y := a[i], b[j]; {
		case x>>8 < y>>8:
			dst = append(dst, x)
			i++
		case y>>8 < x>>8:
			dst = append(dst, y)
			j++
		default:
			dst = append(dst, min(x, y))
			i, j = i+1, j+1
		}
	}
	dst = append(dst, a[i:]...)
	return append(dst, b[j:]...)
}

// ancestors walks up from set id breadth first, which finds each ancestor at its
// fewest hops.
func (st *state) ancestors(id uint32) []uint64 {
	sc := st.begin()
	sc.mark[id] = sc.epoch
	q, qd := append(sc.queue[:0], id), append(sc.queueD[:0], 0)
	var out []uint64
	for i := 0; i < len(q); i++ {
		ps, _ := st.node(q[i]).parents.current()
		d := qd[i]
		if d < 255 {
			d++
		}
		for _, p := range ps {
			if sc.mark[p] == sc.epoch {
				continue
			}
			sc.mark[p] = sc.epoch
			out = append(out, uint64(p)<<8|uint64(d))
			q, qd = append(q, p), append(qd, d)
		}
	}
	sc.queue, sc.queueD = q, qd
	slices.Sort(out)
	return out
}
