package launcherlinux

import (
	"testing"

	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
)

// BenchmarkBuildPlan is the planning the daemon does for each launch of
// the workspace-write preset with a terminal, on this host's paths.
func BenchmarkBuildPlan(b *testing.B) {
	pol, err := policy.Preset("workspace-write", b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	req := launcher.PlanRequest{
		Policy: pol, Argv: []string{"/bin/true"}, Env: []string{"PATH=/bin"},
		UID: 1000, GID: 1000, Terminal: true, HideSockets: []string{"/run/sandboxd/sandboxd.sock"}, SessionSocket: "/run/s.sock",
	}
	host := Host{Set: SetNamespaces, LandlockABI: 7, Notify: true, Exists: hostExists}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := BuildPlan(req, host); err != nil {
			b.Fatal(err)
		}
	}
}
