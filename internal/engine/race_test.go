//go:build race

package engine_test

// raceSlack is what the race detector adds to allocation counts: it drops a quarter of
// what goes back to a sync.Pool, so a pooled evaluator and its memo are sometimes made
// afresh.
const raceSlack = 3
