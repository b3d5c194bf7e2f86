//go:build race

package sandbox

// raceEnabled is true when the tests run under the race detector, which
// makes wazero's compiler and interpreter about ten times slower.
const raceEnabled = true
