package launcherwindows

import (
	"slices"
	"strings"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// What the backend checks when it starts. The per-user probes are named
// with the user after a space, e.g. "credentials sandboxd-offline".
const (
	// ProbePrivileges looks for the privileges starting a process with
	// another token and checking access as it take.
	ProbePrivileges = "privileges"
	// ProbeStateDir checks that the state directory and the journal in
	// it can only have been written by SYSTEM or administrators: the
	// daemon acts on what the journal says with SYSTEM's rights.
	ProbeStateDir = "state directory"
	// ProbeJournal undoes what the sessions of a daemon that died left
	// on the host; a failure refuses nothing, and the next start retries.
	ProbeJournal = "journal sweep"
	// ProbeStaleGrants removes the persistent grants to the sandbox users
	// that versions before per-session grants stamped on write roots; while
	// any is left, another caller's sandbox may read a past write root, so
	// a failure refuses every session.
	ProbeStaleGrants = "stale grants"
	// ProbeUsers looks the sandbox users up.
	ProbeUsers = "sandbox users"
	// ProbeCredentials decrypts a sandbox user's password.
	ProbeCredentials = "credentials"
	// ProbeLogon logs a sandbox user on as a batch job.
	ProbeLogon = "logon"
	// ProbeFirewall looks for the persistent filters of network NONE.
	ProbeFirewall = "firewall filters"
)

// ProbeResult is the outcome of one probe.
type ProbeResult = launcher.ProbeResult

// Host is what the backend found about this Windows host when it started.
type Host struct {
	// Kernel names the release, e.g. "Windows 10.0.26100".
	Kernel string
	// System reports that the daemon runs as LocalSystem.
	System bool
	NumCPU int
	// OfflineSID and OnlineSID are the sandbox users' SIDs, empty for a
	// user not provisioned.
	OfflineSID, OnlineSID string
	Probes                []ProbeResult
}

// Get returns the result of a probe; one that was not run did not work.
func (h *Host) Get(name string) ProbeResult { return launcher.FindProbe(h.Probes, name) }

const remedyInstall = "run `sandboxd install` in an elevated shell"

func refusal(field, mechanism string, r ProbeResult, found, remedy string) *launcher.Unenforceable {
	if r.Detail != "" {
		found += ": " + r.Detail
	}
	return &launcher.Unenforceable{Field: field, Mechanism: mechanism, Found: found, Errno: r.Errno, Probe: r.Op, Remedy: remedy}
}

// Refusal is what every Start returns when no sandbox can be started on
// this host, nil when one can.
func (h *Host) Refusal() *launcher.Unenforceable {
	const mech = "CreateProcessAsUser with a restricted token of a sandbox user"
	if r := h.Get(ProbePrivileges); !r.OK {
		return refusal("process", mech, r, "the daemon lacks a privilege it needs", "run sandboxd as the service `sandboxd install` registers, as LocalSystem")
	}
	if r := h.Get(ProbeStateDir); !r.OK {
		return refusal("process", mech, r, "the state directory is not one only SYSTEM and administrators can write", remedyInstall)
	}
	// Probed only where the sandbox users exist; not probed refuses nothing.
	if i := slices.IndexFunc(h.Probes, func(r ProbeResult) bool { return r.Name == ProbeStaleGrants }); i >= 0 && !h.Probes[i].OK {
		r := h.Probes[i]
		return refusal("filesystem.write", mechanismACL+": write roots granted to each session alone", r,
			"grants to the shared sandbox users that an earlier version stamped are still on the host", "restart the service, or run `sandboxd uninstall` and `sandboxd install`")
	}
	return nil
}

// UserRefusal is what refuses a session that would run as user when
// that user could not be logged on when the backend started, nil when it
// could.
func (h *Host) UserRefusal(field, user string) *launcher.Unenforceable {
	if r := h.Get(ProbeUsers); !r.OK {
		return refusal(field, logonMechanism(user), r, "the sandbox users are not provisioned", remedyInstall)
	}
	if r := h.Get(ProbeCredentials + " " + user); !r.OK {
		return credentialsRefusal(field, user, r)
	}
	if r := h.Get(ProbeLogon + " " + user); !r.OK {
		return logonRefusal(field, user, r)
	}
	return nil
}

func logonMechanism(user string) string { return "a logon of the local user " + user }

func credentialsRefusal(field, user string, r ProbeResult) *launcher.Unenforceable {
	return refusal(field, logonMechanism(user), r, "its password cannot be read", remedyInstall)
}

func logonRefusal(field, user string, r ProbeResult) *launcher.Unenforceable {
	return refusal(field, logonMechanism(user), r, "it cannot be logged on as a batch job", remedyInstall)
}

// FirewallRefusal is what refuses a network NONE session when the
// filters were not in force at the last check, nil when they were.
func (h *Host) FirewallRefusal() *launcher.Unenforceable {
	if r := h.Get(ProbeFirewall); !r.OK {
		return firewallRefusal(r)
	}
	return nil
}

func firewallRefusal(r ProbeResult) *launcher.Unenforceable {
	return refusal("network.mode", "persistent Windows Filtering Platform filters for "+OfflineUser, r,
		"the filters are not all in force", remedyInstall+" (the Base Filtering Engine service must be running)")
}

func (h *Host) facts() *sandboxdv1.HostFacts {
	return &sandboxdv1.HostFacts{Os: "windows", Kernel: h.Kernel, Root: h.System, Rootless: !h.System}
}

func (h *Host) probes() []*sandboxdv1.ProbeResult { return launcher.ProbesProto(h.Probes) }

// exampleStateDir stands for the state directory in the capabilities
// report; where it is does not change the plan.
const exampleStateDir = `C:\ProgramData\sandboxd`

// onDriveC moves the POSIX paths of launcher.Features to drive C: every
// backend answers for the same features, spelled for its own OS.
func onDriveC(p *sandboxdv1.Policy) {
	fs := p.GetFilesystem()
	if fs == nil {
		return
	}
	move := func(ps []string) []string {
		out := make([]string, 0, len(ps))
		for _, q := range ps {
			if strings.HasPrefix(q, "/") {
				q = "C:" + strings.ReplaceAll(q, "/", `\`)
			}
			out = append(out, q)
		}
		return out
	}
	fs.ReadRoots, fs.Write, fs.ReadOnly, fs.Deny = move(fs.ReadRoots), move(fs.Write), move(fs.ReadOnly), move(fs.Deny)
}

// CapabilitiesOf is the report for host h: the facts and probe results,
// whether the mechanism set works, and for each policy feature whether it
// is enforced and how, planned and refused exactly as Start would.
func CapabilitiesOf(h *Host) *sandboxdv1.CapabilitiesReport {
	r := &sandboxdv1.CapabilitiesReport{Backend: BackendName, Host: h.facts(), Probes: h.probes()}
	host := h.Refusal()
	set := &sandboxdv1.MechanismSet{
		Name: MechanismSet,
		Description: "a write-restricted token of a logon of a dedicated local user, NTFS ACL entries keyed on SIDs only that token carries, " +
			"persistent Windows Filtering Platform filters for the network NONE user, and a job object holding every process of the session",
		Available: host == nil,
	}
	if host != nil {
		set.Missing = append(set.Missing, host.Found+" ("+host.Mechanism+")")
	}
	r.MechanismSets = append(r.MechanismSets, set)
	r.Features = launcher.FeatureSupport(func(p *sandboxdv1.Policy) (string, []*sandboxdv1.FieldEnforcement, error) {
		onDriveC(p)
		plan, err := NewPlan(launcher.PlanRequest{Policy: p, SessionID: "capabilities"}, PlanHost{
			OfflineSID: h.OfflineSID, OnlineSID: h.OnlineSID,
			TempDir: exampleStateDir + `\tmp\capabilities`, NumCPU: max(h.NumCPU, 1),
			// Directories below which every object inherits: any other
			// path is refused for the path, not for the host.
			Uninherited: func(string) ([]Object, error) { return nil, nil },
			Kind:        func(string) (bool, uint32, error) { return true, 1, nil },
		})
		switch {
		case err != nil:
			return "", nil, err
		case host != nil:
			return "", nil, host
		}
		if u := h.sessionRefusal(plan); u != nil {
			return "", nil, u
		}
		return MechanismSet, plan.Report, nil
	})
	return r
}

// sessionRefusal is what refuses a session of plan on this host beyond
// Refusal: its user, or for network NONE the filters.
func (h *Host) sessionRefusal(plan *Plan) *launcher.Unenforceable {
	if u := h.UserRefusal("network.mode", plan.User); u != nil {
		return u
	}
	if len(plan.Firewall) > 0 {
		return h.FirewallRefusal()
	}
	return nil
}
