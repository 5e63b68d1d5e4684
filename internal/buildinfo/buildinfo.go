// Package buildinfo owns what a latch binary knows of its own build: the module
// version, the commit and the time it was built from, and the Go toolchain.
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Info describes the running binary.
type Info struct {
	// Version is the module version ("v1.2.3"), or "(devel)" for a build from a source tree.
	Version string
	// Commit is the VCS revision the binary was built from, with "-dirty" when the tree had
	// uncommitted changes; "" when the build recorded none (go run, go test).
	Commit string
	// CommitTime is the commit's time (RFC 3339), "" when unknown: the date of what was
	// built, which unlike a build date is the same in every reproducible build of it.
	CommitTime string
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Read returns the running binary's build information.
func Read() Info {
	info := Info{Version: "(devel)"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	info.GoVersion = bi.GoVersion
	if bi.Main.Version != "" {
		info.Version = bi.Main.Version
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.time":
			info.CommitTime = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && info.Commit != "" {
		info.Commit += "-dirty"
	}
	return info
}

// Short is the version and commit in one word, for a startup line: "v1.2.3" or
// "(devel) 1a2b3c4d5e6f".
func (i Info) Short() string {
	if i.Commit == "" {
		return i.Version
	}
	c, dirty := strings.CutSuffix(i.Commit, "-dirty")
	if len(c) > 12 {
		c = c[:12]
	}
	if dirty {
		c += "-dirty"
	}
	return i.Version + " " + c
}

// String is every known field, one per line, as `latch version` prints them.
func (i Info) String() string {
	s := fmt.Sprintf("version: %s\n", i.Version)
	for _, f := range []struct{ name, v string }{
		{"commit", i.Commit}, {"commit time", i.CommitTime}, {"go", i.GoVersion},
	} {
		if f.v != "" {
			s += fmt.Sprintf("%s: %s\n", f.name, f.v)
		}
	}
	return s
}
