package launcherlinux

import (
	"fmt"
	"strconv"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// The cgroup controllers that enforce policy limits.
const (
	ctlMemory = "memory"
	ctlPids   = "pids"
	ctlCPU    = "cpu"
)

// limitControllers are the controllers a policy's limits need, in a fixed
// order.
func limitControllers(l *sandboxdv1.Limits) []string {
	var c []string
	if l.GetMemoryBytes() != 0 {
		c = append(c, ctlMemory)
	}
	if l.GetPids() != 0 {
		c = append(c, ctlPids)
	}
	if l.GetCpuMillis() != 0 {
		c = append(c, ctlCPU)
	}
	return c
}

// limitField is the policy field a controller enforces.
func limitField(controller string) string {
	switch controller {
	case ctlMemory:
		return "limits.memory_bytes"
	case ctlPids:
		return "limits.pids"
	}
	return "limits.cpu_millis"
}

// cgroupSetting is one write into a session's cgroup.
type cgroupSetting struct {
	Controller, File, Value string
	// Optional settings are skipped where the file does not exist: swap
	// accounting is a kernel option, needed only on a host with swap
	// (elsewhere the session is refused).
	Optional bool
}

// cpuQuota turns thousandths of a CPU into a CFS quota and period in
// microseconds. The kernel's least quota is 1 ms, so below 10 thousandths
// the period grows instead of the quota being rounded up, which would grant
// more CPU than asked.
func cpuQuota(millis uint32) (quota, period uint64) {
	period = 100_000
	if millis < 10 {
		period = 1_000_000
	}
	return uint64(millis) * period / 1000, period
}

// cgroupSettings are the writes that enforce l, for a controller mounted
// as cgroup v2 (v2[controller]) or v1. The memory limit covers swap too, so
// that a hog is stopped at the limit rather than paged out; on v2 the whole
// session is one OOM group, so the kernel kills all of it, and on v1, which
// has no such group, the backend does that when it sees the OOM kill.
func cgroupSettings(l *sandboxdv1.Limits, v2 map[string]bool) []cgroupSetting {
	var s []cgroupSetting
	if m := l.GetMemoryBytes(); m != 0 {
		v := strconv.FormatUint(m, 10)
		if v2[ctlMemory] {
			s = append(s,
				cgroupSetting{Controller: ctlMemory, File: "memory.max", Value: v},
				cgroupSetting{Controller: ctlMemory, File: "memory.swap.max", Value: "0", Optional: true},
				cgroupSetting{Controller: ctlMemory, File: "memory.oom.group", Value: "1"},
			)
		} else {
			s = append(s,
				cgroupSetting{Controller: ctlMemory, File: "memory.limit_in_bytes", Value: v},
				cgroupSetting{Controller: ctlMemory, File: "memory.memsw.limit_in_bytes", Value: v, Optional: true},
			)
		}
	}
	if p := l.GetPids(); p != 0 {
		s = append(s, cgroupSetting{Controller: ctlPids, File: "pids.max", Value: strconv.FormatUint(uint64(p), 10)})
	}
	if c := l.GetCpuMillis(); c != 0 {
		quota, period := cpuQuota(c)
		if v2[ctlCPU] {
			s = append(s, cgroupSetting{Controller: ctlCPU, File: "cpu.max", Value: fmt.Sprintf("%d %d", quota, period)})
		} else {
			// The period first: the quota is checked against it.
			s = append(s,
				cgroupSetting{Controller: ctlCPU, File: "cpu.cfs_period_us", Value: strconv.FormatUint(period, 10)},
				cgroupSetting{Controller: ctlCPU, File: "cpu.cfs_quota_us", Value: strconv.FormatUint(quota, 10)},
			)
		}
	}
	return s
}

// limitMechanisms is what the enforcement report says for each limit field
// l sets.
func limitMechanisms(l *sandboxdv1.Limits, v2 map[string]bool) []*sandboxdv1.FieldEnforcement {
	version := func(c string) string {
		if v2[c] {
			return "cgroup v2"
		}
		return "cgroup v1"
	}
	var out []*sandboxdv1.FieldEnforcement
	if m := l.GetMemoryBytes(); m != 0 {
		mech := fmt.Sprintf("%s memory.max %d, no swap beyond it; the session is killed on OOM", version(ctlMemory), m)
		if !v2[ctlMemory] {
			mech = fmt.Sprintf("cgroup v1 memory.limit_in_bytes %d (and memsw where swap is accounted); the session is killed on OOM", m)
		}
		out = append(out, &sandboxdv1.FieldEnforcement{Field: "limits.memory_bytes", Mechanism: mech})
	}
	if p := l.GetPids(); p != 0 {
		out = append(out, &sandboxdv1.FieldEnforcement{Field: "limits.pids", Mechanism: fmt.Sprintf("%s pids.max %d", version(ctlPids), p)})
	}
	if c := l.GetCpuMillis(); c != 0 {
		quota, period := cpuQuota(c)
		out = append(out, &sandboxdv1.FieldEnforcement{Field: "limits.cpu_millis", Mechanism: fmt.Sprintf("%s cpu quota %dus per %dus", version(ctlCPU), quota, period)})
	}
	return out
}

// limitDenialSources says how the daemon sees the sandbox run into each
// limit l sets.
func limitDenialSources(p *sandboxdv1.Policy) []*sandboxdv1.DenialSource {
	l := p.GetLimits()
	var out []*sandboxdv1.DenialSource
	if l.GetPids() != 0 {
		out = append(out, &sandboxdv1.DenialSource{Kind: "limits.pids", Observed: true,
			How: "the session cgroup's count of refused forks (pids.events), read every 100 ms: one denial a second at most, with the running count"})
	}
	if l.GetMemoryBytes() != 0 {
		out = append(out, &sandboxdv1.DenialSource{Kind: "limits.memory_bytes", Observed: true,
			How: "the session cgroup's OOM kill count: the first kill is recorded, and the session is ended as killed by the limit"})
	}
	if l.GetOutputBytes() != 0 {
		out = append(out, &sandboxdv1.DenialSource{Kind: "limits.output_bytes", Observed: true,
			How: "the daemon counts the output it keeps and records the first byte it drops"})
	}
	return out
}

// hierarchy is where one controller is mounted and where the daemon sits
// in it.
type hierarchy struct {
	v2 bool
	// mount is the hierarchy's mount point, own the daemon's cgroup
	// directory in it.
	mount, own string
}

// cgroupHost is what the daemon found of the cgroup controllers that
// enforce limits: per controller the hierarchy, or why it cannot be used.
type cgroupHost struct {
	ctl     map[string]*hierarchy
	missing map[string]string
}

var limitControllerNames = []string{ctlMemory, ctlPids, ctlCPU}

// probes are the host probe's results for the controllers.
func (h *cgroupHost) probes() []ProbeResult {
	var out []ProbeResult
	for _, c := range limitControllerNames {
		r := ProbeResult{Name: cgroupPrim(c), Op: "find the " + c + " controller's hierarchy and the daemon's cgroup in it"}
		if hy := h.ctl[c]; hy != nil {
			r.OK = true
			version := "v1"
			if hy.v2 {
				version = "v2"
			}
			r.Detail = fmt.Sprintf("cgroup %s at %s", version, hy.own)
		} else {
			r.Detail = h.missing[c]
		}
		out = append(out, r)
	}
	return out
}

// v2Set says which controllers are on the unified hierarchy.
func (h *cgroupHost) v2Set() map[string]bool {
	m := map[string]bool{}
	for c, hy := range h.ctl {
		m[c] = hy.v2
	}
	return m
}

// remedyCgroup is what a host without a usable controller can do.
const remedyCgroup = "run sandboxd as root, or give it a cgroup of its own that it may write (cgroup v2: systemd Delegate=yes, or systemd-run --user -p Delegate=yes; cgroup v1: a directory per controller owned by the daemon's user, with the daemon in it), or drop the limit from the policy"
