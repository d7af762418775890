package launcherlinux

import (
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// refuseUnsupported names the first field this backend has no mechanism for.
// Refusing is the only honest answer: running without it would be weaker than
// the policy asks.
func refuseUnsupported(p *sandboxdv1.Policy) error {
	const found = "this sandboxd version has no mechanism for it"
	if p.GetFilesystem().GetRead() == sandboxdv1.Filesystem_LISTED {
		return &launcher.Unenforceable{Field: "filesystem.read", Mechanism: "mount-ns root built from listed read roots", Found: found, Remedy: "use read ALL with deny paths for what must stay unreadable"}
	}
	if p.GetNetwork().GetMode() == sandboxdv1.Network_ALLOWLIST {
		return &launcher.Unenforceable{Field: "network.allow", Mechanism: "daemon-run allowlist proxy", Found: found, Remedy: "use network NONE or HOST"}
	}
	l := p.GetLimits()
	switch {
	case l.GetMemoryBytes() != 0:
		return &launcher.Unenforceable{Field: "limits.memory_bytes", Mechanism: "cgroup v2 memory.max", Found: found, Remedy: "drop limits.memory_bytes from the policy"}
	case l.GetPids() != 0:
		return &launcher.Unenforceable{Field: "limits.pids", Mechanism: "cgroup v2 pids.max", Found: found, Remedy: "drop limits.pids from the policy"}
	case l.GetCpuMillis() != 0:
		return &launcher.Unenforceable{Field: "limits.cpu_millis", Mechanism: "cgroup v2 cpu.max", Found: found, Remedy: "drop limits.cpu_millis from the policy"}
	case l.GetOutputBytes() != 0:
		return &launcher.Unenforceable{Field: "limits.output_bytes", Mechanism: "daemon output accounting", Found: found, Remedy: "drop limits.output_bytes from the policy"}
	}
	return nil
}
