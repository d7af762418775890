package policy

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// Random JSON rarely decodes to a valid policy, so the fuzzers mostly
// exercise the decoder. These tests drive the same invariants with policies
// built from small alphabets of overlapping paths and hosts, where the
// nesting cases that matter come up often.
var (
	randPaths = []string{"/", "/a", "/a/", "/a/b", "/a/b/c", "/a-b", "/a/b-c", "/c", "/a/../c", "/c/d"}
	randHosts = []string{"a.com", "*.a.com", "b.a.com", "*.b.a.com", "B.A.com", "a.com.", "*.B.a.com.", "::1", "0::1", "10.0.0.1", "10.0.0.1.", "*.com"}
	randPorts = []uint32{0, 80, 443}
	randNums  = []uint64{0, 1, 5}
)

func randPolicy(r *rand.Rand) *sandboxdv1.Policy {
	pick := func(from []string) []string {
		var out []string
		for range r.IntN(3) {
			out = append(out, from[r.IntN(len(from))])
		}
		return out
	}
	p := &sandboxdv1.Policy{}
	if r.IntN(4) > 0 {
		p.Filesystem = &sandboxdv1.Filesystem{
			Read:     sandboxdv1.Filesystem_Read(r.IntN(3)),
			Write:    pick(randPaths),
			ReadOnly: pick(randPaths),
			Deny:     pick(randPaths),
		}
		if p.Filesystem.Read == sandboxdv1.Filesystem_LISTED {
			p.Filesystem.ReadRoots = pick(randPaths)
		}
	}
	if r.IntN(4) > 0 {
		p.Network = &sandboxdv1.Network{Mode: sandboxdv1.Network_Mode(r.IntN(4))}
		if p.Network.Mode == sandboxdv1.Network_ALLOWLIST {
			for range r.IntN(4) {
				p.Network.Allow = append(p.Network.Allow, &sandboxdv1.NetworkAllow{
					Host: randHosts[r.IntN(len(randHosts))],
					Port: randPorts[r.IntN(len(randPorts))],
				})
			}
		}
	}
	if r.IntN(3) > 0 {
		n := func() uint64 { return randNums[r.IntN(len(randNums))] }
		p.Limits = &sandboxdv1.Limits{MemoryBytes: n(), Pids: uint32(n()), CpuMillis: uint32(n()), OutputBytes: n()}
		if r.IntN(2) > 0 {
			p.Limits.Timeout = &durationpb.Duration{Seconds: int64(n())}
		}
	}
	if r.IntN(3) > 0 {
		p.Children = &sandboxdv1.Children{Allow: r.IntN(2) > 0}
	}
	return p
}

// randValidPolicy returns a random policy that passes Validate.
func randValidPolicy(r *rand.Rand) *sandboxdv1.Policy {
	for {
		if p := randPolicy(r); Validate(p) == nil {
			return p
		}
	}
}

func TestRandomPolicies(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		checkPolicy(t, randValidPolicy(r))
	}
}

func TestRandomNarrow(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	succeeded := 0
	for range 20000 {
		parent, child := randValidPolicy(r), randValidPolicy(r)
		if _, err := Narrow(parent, child); err == nil {
			succeeded++
		}
		checkNarrow(t, parent, child)
	}
	// Guards against the generator drifting into only ever widening.
	if succeeded < 1000 {
		t.Errorf("only %d of 20000 random narrowings succeeded", succeeded)
	}
}
