//go:build unix

package relay

import (
	"fmt"
	"syscall"
)

// RaiseFileLimit raises the soft RLIMIT_NOFILE to the hard limit, as
// relays commonly do (Go's runtime does the same at start since 1.19;
// doing it here makes it explicit and covers a limit lowered since), and
// returns the budget of the limit it ends with. When the limit cannot be
// read, it returns the budget of 1,024, the common default.
func RaiseFileLimit() (FileBudget, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return BudgetFor(1024), fmt.Errorf("relay: read file limit: %w", err)
	}
	var err error
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = raised.Max
		if err = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err == nil {
			lim = raised
		} else {
			err = fmt.Errorf("relay: raise file limit from %d to %d: %w", lim.Cur, lim.Max, err)
		}
	}
	cur := lim.Cur
	if cur > 1<<24 {
		cur = 1 << 24
	}
	return BudgetFor(int(cur)), err
}
