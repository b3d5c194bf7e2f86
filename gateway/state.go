package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Cursors are the gateway's persisted progress, as Unix seconds of
// created_at (0: never caught up, so the first catch-up covers all time).
//
//   - In: every backend event matching to_mesh with created_at >= In-overlap
//     that existed when the last backend → mesh catch-up started is stored
//     locally (or was refused by the policy).
//   - Out: every local event matching to_backend with created_at >=
//     Out-overlap was acknowledged by the backend (OK true or a final OK
//     false), except those still pending, whose created_at Out never passes.
type Cursors struct {
	In  int64 `json:"in"`
	Out int64 `json:"out"`
}

// stateFile persists Cursors atomically: a temporary file is written and
// fsynced, renamed over the old one, and the directory fsynced, so a kill
// at any moment leaves either the old or the new cursors.
type stateFile struct {
	path string
}

func (s stateFile) load() (Cursors, error) {
	var c Cursors
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("gateway: state: %w", err)
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("gateway: state %s is corrupt (%v); delete it to catch up from the beginning", s.path, err)
	}
	return c, nil
}

func (s stateFile) save(c Cursors) error {
	data, _ := json.Marshal(c)
	dir := filepath.Dir(s.path)
	f, err := os.CreateTemp(dir, ".gateway-state-*")
	if err != nil {
		return fmt.Errorf("gateway: state: %w", err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("gateway: state: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("gateway: state: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("gateway: state: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("gateway: state: %w", err)
	}
	return nil
}
