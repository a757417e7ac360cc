//go:build race

package engine

// raceEnabled: tests of many users run fewer under the race detector,
// which makes every goroutine switch ten times as dear.
const raceEnabled = true
