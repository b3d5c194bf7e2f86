//go:build windows

package node

import (
	"os"

	"golang.org/x/sys/windows"
)

// errLocked is what lockFile returns when another process holds the lock.
var errLocked = windows.ERROR_LOCK_VIOLATION

// lockFile takes an exclusive lock on f's first byte without waiting.
func lockFile(f *os.File) error {
	return windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, new(windows.Overlapped))
}

// unlockFile releases lockFile's lock.
func unlockFile(f *os.File) error {
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, new(windows.Overlapped))
}
