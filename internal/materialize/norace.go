//go:build !race

package materialize

// raceEnabled: the race detector is on (see race.go).
const raceEnabled = false
