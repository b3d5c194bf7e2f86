package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockFile is the file in a node home that the running node holds locked,
// with its process id in it, so that a second node on the same home is
// refused with a message naming the first instead of the store's
// "resource temporarily unavailable".
const LockFile = "node.lock"

// ErrHomeInUse is returned by Open when another process runs a node on the
// same home.
var ErrHomeInUse = errors.New("home in use by another node")

// homeLock is a held lock on a node home.
type homeLock struct{ f *os.File }

// lockHome takes the home's lock, or says which process holds it. The lock
// is an flock (LockFileEx on Windows), so it goes with the process: a node
// killed with kill -9 leaves no stale lock behind.
func lockHome(h Home) (*homeLock, error) {
	path := filepath.Join(h.Dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if err := lockFile(f); err != nil {
		pid, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, errLocked) {
			who := "another process"
			if p, perr := strconv.Atoi(strings.TrimSpace(string(pid))); perr == nil && p > 0 {
				who = "pid " + strconv.Itoa(p)
			}
			return nil, fmt.Errorf("%w (%s) at %s: stop it first, or give this one another --home", ErrHomeInUse, who, h.Dir)
		}
		return nil, fmt.Errorf("node: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &homeLock{f: f}, nil
}

// release lets the next node take the home.
func (l *homeLock) release() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Truncate(0)
	unlockFile(l.f)
	l.f.Close()
	l.f = nil
}
