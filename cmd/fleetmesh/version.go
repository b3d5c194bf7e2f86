package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"fleetmesh.org/fleetmesh/nostr"
)

func init() {
	register("version", "print the version, commit and Go toolchain of this build", runVersion)
}

// version and commit are stamped by scripts/release.sh with
// -ldflags "-X main.version=… -X main.commit=…". An unstamped build (go run,
// go build) reports the module version or "devel", and the commit its VCS
// stamp names when the build has one.
var version, commit = "", ""

// buildVersion is what `fleetmesh version` prints.
type buildVersion struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
	// Signatures is the Nostr signature backend compiled in.
	Signatures string `json:"signatures"`
}

func currentVersion() buildVersion {
	v := buildVersion{Version: version, Commit: commit, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, Signatures: nostr.Backend}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if v.Commit == "" {
					v.Commit = s.Value
				}
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Version == "" {
		v.Version = "devel"
	}
	return v
}

func (v buildVersion) String() string {
	s := "fleetmesh " + v.Version
	if v.Commit != "" {
		c := v.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += " (" + c
		if v.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s + " " + v.Go + " " + v.Platform + " signatures=" + v.Signatures
}

func runVersion(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	v := currentVersion()
	if *asJSON {
		return json.NewEncoder(stdout).Encode(v)
	}
	_, err := fmt.Fprintln(stdout, v)
	return err
}
