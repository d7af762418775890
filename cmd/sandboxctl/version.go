package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// versionLine is what --version prints: the module version and the commit
// the go command stamped into the binary, so that a bug report names the
// exact source. A binary built outside a checkout, or with
// -buildvcs=false, has no commit, and says so rather than print nothing.
func versionLine(bi *debug.BuildInfo) string {
	version, commit, modified := "unknown", "", false
	goVersion := runtime.Version()
	if bi != nil {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			version = v
		}
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	switch {
	case commit == "":
		commit = "unknown (built without VCS information)"
	case modified:
		commit += " (with uncommitted changes)"
	}
	return fmt.Sprintf("sandboxctl version %s, commit %s, %s %s/%s", version, commit, goVersion, runtime.GOOS, runtime.GOARCH)
}

// buildInfo is the running binary's, nil when it carries none.
func buildInfo() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}
