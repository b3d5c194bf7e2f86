//go:build !unix

package relay

// RaiseFileLimit returns the budget of 16,384 files where the process has
// no RLIMIT_NOFILE to read or raise (Windows: a process's handles are
// bounded by memory, not by a small per-process default).
func RaiseFileLimit() (FileBudget, error) { return BudgetFor(16384), nil }
