package node

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestHomeLock(t *testing.T) {
	h := Home{Dir: t.TempDir()}
	first, err := lockHome(h)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockHome(h)
	if !errors.Is(err, ErrHomeInUse) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(err.Error(), h.Dir) {
		t.Fatalf("second lock: %v; want ErrHomeInUse naming pid %d and the home", err, os.Getpid())
	}
	first.release()
	again, err := lockHome(h)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again.release()
}
