package launcherwindows

import (
	"errors"
	"slices"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// FuzzNewPlan plans arbitrary policies, spelled in every way a Windows
// path can be, and holds each plan to the invariants and to what the
// policy promises, decided from the ACEs alone by the access check model.
// A policy whose paths are all plain absolute paths below a volume root
// must be planned, not refused.
func FuzzNewPlan(f *testing.F) {
	f.Add(`C:\work\repo`, `C:\work\repo\.git`, `C:\work\repo\secrets`, `C:\Users\dev\.ssh`, false, false, uint32(0), uint8(8), uint8(0))
	f.Add(`C:\work\repo`, `C:\work\repo\a\b\.git`, `C:\work\repo\a\b\c`, `D:\keys`, true, true, uint32(1500), uint8(8), uint8(0x0f))
	f.Add(`c:/Work/Repo/`, `C:\WORK\repo\.GIT`, `C:\work\REPO\.git\hooks`, `c:\work\repo`, false, true, uint32(1), uint8(64), uint8(0x05))
	f.Add(`\\server\share\app`, `//server/share/app/.git`, `\\server\share\app\deploy\keys`, `\\other\share`, true, false, uint32(64000), uint8(2), uint8(0x0a))
	f.Add(`C:\work\repo\.git\w`, `C:\work\repo\.git`, `C:\work\repo\x\..\y`, `C:\work`, false, false, uint32(0), uint8(0), uint8(0x02))
	f.Add(`C:\work\repo\.git\w`, `C:\work\repo\.git`, `C:\work\repo\.git\w\x`, `E:\x`, true, false, uint32(0), uint8(1), uint8(0x01))
	f.Add(`C:\`, `C:\x`, `\\?\C:\x`, `C:\nul`, false, false, uint32(0), uint8(1), uint8(0))
	f.Add(`C:\w. `, `C:\w\a:b`, `\x`, `C:rel`, true, true, uint32(7), uint8(3), uint8(0xff))
	f.Add(`C:\ProgramData\sandboxd`, `C:\ProgramData\sandboxd\tmp`, `C:\ProgramData\sandboxd\tmp\fuzz`, `C:\ProgramData`, false, true, uint32(0), uint8(1), uint8(0))
	f.Fuzz(func(t *testing.T, write, readOnly, deny, deny2 string, host, children bool, cpuMillis uint32, numCPU, missingMask uint8) {
		p := &sandboxdv1.Policy{
			Filesystem: &sandboxdv1.Filesystem{Write: []string{write}, ReadOnly: []string{readOnly}, Deny: []string{deny, deny2}},
			Network:    &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE},
			Children:   &sandboxdv1.Children{Allow: children},
			Limits:     &sandboxdv1.Limits{CpuMillis: cpuMillis},
		}
		if host {
			p.Network.Mode = sandboxdv1.Network_HOST
		}
		in := input(p)
		in.TempDir = `C:\ProgramData\sandboxd\tmp\fuzz`
		in.NumCPU = int(numCPU)
		// Each bit takes one path, or the directory above it, away;
		// whatever is below a missing path is missing too.
		var gone []string
		for i, q := range []string{readOnly, deny, readOnly, deny2} {
			if missingMask&(1<<i) == 0 || checkPath(q) != "" {
				continue
			}
			if i == 2 {
				q = parent(cleanPath(q))
			}
			gone = append(gone, q)
		}
		in.Exists = missing(gone...)

		pl, err := newPlan(in)
		plain := true
		for _, q := range []string{write, readOnly, deny, deny2} {
			plain = plain && checkPath(q) == "" && !isVolumeRoot(cleanPath(q))
		}
		if err != nil {
			var u *launcher.Unenforceable
			if plain && in.Exists(write) && (cpuMillis == 0 || numCPU > 0) {
				t.Fatalf("NewPlan refused a policy it can express: %v", err)
			}
			if !errors.As(err, &u) && !(cpuMillis != 0 && numCPU == 0) {
				t.Fatalf("NewPlan failed with an error that names no field: %v", err)
			}
			return
		}
		if slices.ContainsFunc(expect(in).write, func(w string) bool { return !in.Exists(w) }) {
			t.Fatalf("NewPlan planned a write root that does not exist")
		}
		if !plain {
			t.Fatalf("NewPlan planned a path it cannot stamp as spelled: %q %q %q %q", write, readOnly, deny, deny2)
		}
		checkInvariants(t, in, pl)
		checkSemantics(t, in, pl)
	})
}
