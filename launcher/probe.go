package launcher

import (
	"syscall"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// ProbeResult is the outcome of one thing a backend tried on its host to
// learn what it can enforce.
type ProbeResult struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Op is the operation tried, e.g. "clone(CLONE_NEWUSER)".
	Op     string        `json:"op"`
	Errno  syscall.Errno `json:"errno,omitempty"`
	Detail string        `json:"detail,omitempty"`
}

// Proto is r as the capabilities report carries it.
func (r ProbeResult) Proto() *sandboxdv1.ProbeResult {
	p := &sandboxdv1.ProbeResult{Name: r.Name, Ok: r.OK, Operation: r.Op, Detail: r.Detail}
	if r.Errno != 0 {
		p.Errno = (&Unenforceable{Errno: r.Errno}).Proto().GetErrno()
	}
	return p
}

// FindProbe returns the result named name; a probe that was not run did
// not work.
func FindProbe(results []ProbeResult, name string) ProbeResult {
	for _, r := range results {
		if r.Name == name {
			return r
		}
	}
	return ProbeResult{Name: name, Detail: "not probed"}
}

// ProbesProto is results as the capabilities report carries them.
func ProbesProto(results []ProbeResult) []*sandboxdv1.ProbeResult {
	out := make([]*sandboxdv1.ProbeResult, 0, len(results))
	for _, r := range results {
		out = append(out, r.Proto())
	}
	return out
}
