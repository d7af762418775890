package launcherlinux

import (
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// Primitives the host probe tries. Each is tried for real, in a short-lived
// child, as the identity sandboxes run as.
const (
	PrimUserNS        = "user namespace"
	PrimIDMap         = "uid/gid map of the sandbox identity"
	PrimMountNS       = "mount namespace"
	PrimPIDNS         = "pid namespace"
	PrimIPCNS         = "ipc namespace"
	PrimUTSNS         = "uts namespace"
	PrimCgroupNS      = "cgroup namespace"
	PrimNetNS         = "network namespace"
	PrimLoopback      = "loopback in a new network namespace"
	PrimMounts        = "mounts in a new mount namespace"
	PrimLandlock      = "landlock"
	PrimSeccomp       = "seccomp filter"
	PrimSeccompNotify = "seccomp user notification"
	PrimCgroupMemory  = "cgroup memory controller"
	PrimCgroupPids    = "cgroup pids controller"
	PrimCgroupCPU     = "cgroup cpu controller"
	PrimSwitchID      = "switch to the sandbox identity"
)

// cgroupPrim is the primitive of a limit controller.
func cgroupPrim(controller string) string {
	switch controller {
	case ctlMemory:
		return PrimCgroupMemory
	case ctlPids:
		return PrimCgroupPids
	}
	return PrimCgroupCPU
}

// ProbeResult is the outcome of trying one primitive.
type ProbeResult = launcher.ProbeResult

// HostProbe is what the probe found about this host and this daemon.
type HostProbe struct {
	EUID int
	// Root is euid 0 in the initial user namespace.
	Root bool
	// Container names the container the daemon runs in, "" if none.
	Container string
	Kernel    string
	// LandlockABI is the ABI a sandboxed process actually got, 0 if none.
	LandlockABI int
	Results     []ProbeResult
	// cgroups is what ProbeHost found of the limit controllers; nil in a
	// HostProbe made by hand.
	cgroups *cgroupHost
}

// Get returns the result for a primitive; one that was not probed did not
// work.
func (h *HostProbe) Get(name string) ProbeResult { return launcher.FindProbe(h.Results, name) }

// planHost is what the planner needs to know of h for mechanism set s;
// exists looks at host paths.
func (h *HostProbe) planHost(s MechanismSet, exists func(string) (bool, bool)) Host {
	host := Host{Set: s, LandlockABI: h.LandlockABI, NoSeccomp: !h.Get(PrimSeccomp).OK, Exists: exists}
	if h.cgroups != nil {
		host.CgroupV2 = h.cgroups.v2Set()
	}
	if r := h.Get(PrimSeccompNotify); r.OK {
		host.Notify = true
	} else {
		host.NotifyMissing = r.Op
		switch {
		case r.Errno != 0:
			host.NotifyMissing += ": " + (&launcher.Unenforceable{Errno: r.Errno}).Proto().GetErrno()
		case r.Detail != "":
			host.NotifyMissing += ": " + r.Detail
		}
	}
	return host
}

func (h *HostProbe) facts() *sandboxdv1.HostFacts {
	return &sandboxdv1.HostFacts{
		Os: "linux", Kernel: h.Kernel, Euid: uint32(h.EUID), Root: h.Root,
		Rootless: h.EUID != 0, Container: h.Container, LandlockAbi: int32(h.LandlockABI),
	}
}

func (h *HostProbe) probes() []*sandboxdv1.ProbeResult { return launcher.ProbesProto(h.Results) }
