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
	// NoCommit says why the build names no commit, when it names none.
	NoCommit string `json:"no_commit,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
	// Signatures is the Nostr signature backend compiled in.
	Signatures string `json:"signatures"`
}

// noVCS is what a build with neither a release stamp nor VCS data says
// of its commit.
const noVCS = "this build carries no VCS data (built with -buildvcs=false or outside a git checkout, and not by scripts/release.sh, which stamps the version and commit)"

func currentVersion() buildVersion {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(version, commit, bi)
}

// versionOf is the version of a build stamped with stampVersion and
// stampCommit (-ldflags -X; empty when not stamped) whose build info is bi
// (nil if none): the stamp first, then the module version and VCS data.
func versionOf(stampVersion, stampCommit string, bi *debug.BuildInfo) buildVersion {
	v := buildVersion{Version: stampVersion, Commit: stampCommit, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, Signatures: nostr.Backend}
	if bi != nil {
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
	if v.Commit == "" {
		v.NoCommit = noVCS
	}
	return v
}

func (v buildVersion) String() string {
	return "fleetmesh " + v.short() + " " + v.Go + " " + v.Platform + " signatures=" + v.Signatures
}

// short is the version and commit, as the status and dashboard give them.
func (v buildVersion) short() string {
	s := v.Version
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
	} else {
		s += " (no VCS data)"
	}
	return s
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
	if _, err := fmt.Fprintln(stdout, v); err != nil {
		return err
	}
	if v.NoCommit != "" {
		_, err := fmt.Fprintln(stdout, v.NoCommit)
		return err
	}
	return nil
}
