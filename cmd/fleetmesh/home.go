package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/node"
)

// defaultHome is $FLEETMESH_HOME, else ~/.fleetmesh, so `fleetmesh run`
// works with no flags on a fresh machine.
func defaultHome() string {
	if h := os.Getenv("FLEETMESH_HOME"); h != "" {
		return h
	}
	if d, err := os.UserHomeDir(); err == nil {
		return filepath.Join(d, ".fleetmesh")
	}
	return ".fleetmesh"
}

func homeFlag(fs *flag.FlagSet) *string {
	return fs.String("home", defaultHome(), "node home `directory` (key, config.toml, data)")
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// parse parses flags and turns a flag error into errUsage.
func parse(fs *flag.FlagSet, args []string) error {
	setUsage(fs)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q (flags start with --)", errUsage, fs.Arg(0))
	}
	return nil
}

func home(dir string) node.Home { return node.Home{Dir: dir} }

// loadKey loads the node key of a home, telling the user how to make one.
func loadKey(dir string) (*identity.Key, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: --home DIR is required", errUsage)
	}
	key, err := identity.LoadKey(home(dir).KeyPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no node key in %s: run `fleetmesh init --home %s` first", dir, dir)
	}
	return key, err
}

// printJSON writes v as indented JSON, for output scripts read.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
