package materialize

import (
	"sync/atomic"
	"unsafe"

	"github.com/latch-authz/latch/internal/store"
)

// version is one value of a slot, in force from revision rev until the next newer
// version. Versions never change once published except for older, which pruning cuts.
type version[T any] struct {
	rev   store.Revision
	older atomic.Pointer[version[T]]
	// cut says that older versions were pruned: a read below rev has no answer.
	cut atomic.Bool
	// unknown: the index does not hold this slot's value (dropped past its memory
	// bound); reads at or past rev have no answer.
	unknown bool
	val     T
}

// chain is a slot's versions, newest first. One writer pushes and prunes; any number
// of readers read at their revisions without locks.
type chain[T any] struct{ head atomic.Pointer[version[T]] }

// at returns the value in force at rev, or false when the chain cannot say (pruned,
// or dropped). A slot with no version at or below rev is empty there.
func (c *chain[T]) at(rev store.Revision) (T, bool) {
	var zero T
	v := c.head.Load()
	for v != nil {
		if v.rev <= rev {
			if v.unknown {
				return zero, false
			}
			return v.val, true
		}
		older := v.older.Load()
		if older == nil && v.cut.Load() {
			return zero, false
		}
		v = older
	}
	return zero, true
}

// current returns the newest value (the writer's view) and whether it is known.
func (c *chain[T]) current() (T, bool) {
	var zero T
	v := c.head.Load()
	if v == nil {
		return zero, true
	}
	if v.unknown {
		return zero, false
	}
	return v.val, true
}

// push makes val (or, when unknown, the absence of a value) the slot's value from rev,
// replacing a version of the same revision, and returns the change in the bytes the
// chain holds and whether an older version now awaits pruning.
func (c *chain[T]) push(rev store.Revision, val T, unknown bool, size func(T) int64) (delta int64, superseded bool) {
	nv := &version[T]{rev: rev, unknown: unknown, val: val}
	delta = versionBytes(nv, size)
	head := c.head.Load()
	if head != nil && head.rev == rev {
		delta -= versionBytes(head, size)
		head = head.older.Load()
	}
	if head != nil {
		nv.older.Store(head)
	}
	c.head.Store(nv)
	return delta, head != nil
}

// drop makes the slot's value unknown at every revision its state serves: it takes
// tomb, the state's one tombstone, of its first revision, and frees every version it
// held, returning the change in bytes. Reads of the revisions those versions served
// then evaluate, as every read of a dropped slot does.
func (c *chain[T]) drop(tomb *version[T], size func(T) int64) (delta int64) {
	for v := c.head.Load(); v != nil; v = v.older.Load() {
		delta -= versionBytes(v, size)
	}
	c.head.Store(tomb)
	return delta
}

// prune drops the versions no read at or past horizon needs: those older than the
// newest one at or below horizon. It returns the bytes freed.
func (c *chain[T]) prune(horizon store.Revision, size func(T) int64) int64 {
	v := c.head.Load()
	for v != nil && v.rev > horizon {
		v = v.older.Load()
	}
	if v == nil {
		return 0
	}
	var freed int64
	for o := v.older.Load(); o != nil; o = o.older.Load() {
		freed += versionBytes(o, size)
	}
	if freed > 0 {
		// cut first: a reader that finds older nil must see why.
		v.cut.Store(true)
		v.older.Store(nil)
	}
	return freed
}

// versionBytes is what a version costs on the heap: the struct and its value's
// backing array, each in its allocator size class.
func versionBytes[T any](v *version[T], size func(T) int64) int64 {
	return sizeClass(int64(unsafe.Sizeof(*v))) + size(v.val)
}

// sizeClasses are the Go allocator's small object classes (runtime/sizeclasses.go).
var sizeClasses = [...]int64{
	8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
	288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280,
	1408, 1536, 1792, 2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528,
	6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384, 18432,
	19072, 20480, 21760, 24576, 27264, 28672, sizeClassesMax,
}

// classOf maps an allocation of n bytes, up to the largest class, to its class in
// sizeClasses by (n+7)/8, as the runtime's own table does: an index into it, not a
// search, for a figure a build asks for several times a node.
var classOf = func() (t [sizeClassesMax/8 + 1]uint8) {
	c := 0
	for i := range t {
		for sizeClasses[c] < int64(i)*8 {
			c++
		}
		t[i] = uint8(c)
	}
	return t
}()

const sizeClassesMax = 32768

// sizeClass returns the bytes an allocation of n bytes takes: its size class, or
// whole pages past the largest class.
func sizeClass(n int64) int64 {
	if n == 0 {
		return 0
	}
	if n > sizeClassesMax {
		const page = 8192
		return (n + page - 1) / page * page
	}
	return sizeClasses[classOf[(n+7)>>3]]
}

// tinyBlock is the block the allocator packs small objects without pointers into
// (runtime's maxTinySize).
const tinyBlock = 16

// noscanBytes returns the bytes an allocation of n bytes without pointers takes: its
// size class, or under the race detector, which turns off the packing of such objects
// below tinyBlock, at least a block.
func noscanBytes(n int64) int64 {
	if raceEnabled && n > 0 && n < tinyBlock {
		return tinyBlock
	}
	return sizeClass(n)
}

func ids32Bytes(s []uint32) int64 { return noscanBytes(int64(cap(s)) * 4) }
func ids64Bytes(s []uint64) int64 { return noscanBytes(int64(cap(s)) * 8) }
func summaryBytes(summary) int64  { return 0 }
