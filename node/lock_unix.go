//go:build unix

package node

import (
	"os"
	"syscall"
)

// errLocked is what lockFile returns when another process holds the lock.
var errLocked = syscall.EWOULDBLOCK

// lockFile takes an exclusive lock on f without waiting.
func lockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) }

// unlockFile releases lockFile's lock.
func unlockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
