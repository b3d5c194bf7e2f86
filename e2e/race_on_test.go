//go:build race

package e2e

// raceEnabled says the tests run under the race detector, where a
// load test runs a reduced size by default.
const raceEnabled = true
