//go:build race

package agent

// raceEnabled is true under the race detector, which makes the SDK and the
// stand-in about ten times slower; the heaviest property tests run fewer
// cases then.
const raceEnabled = true
