//go:build race

package materialize

// raceEnabled: the race detector is on, and with it the allocator gives every small
// object without pointers a block of its own (tinyBlock) instead of packing several
// into one.
const raceEnabled = true
