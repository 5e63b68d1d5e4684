//go:build !race

package engine_test

const raceSlack = 0
