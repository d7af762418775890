//go:build !linux

package selftest

import (
	"context"
	"runtime"

	"google.golang.org/protobuf/types/known/timestamppb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// Run reports a failed self-test: there is no probe for this OS yet, and
// an untested backend must not look tested.
func Run(ctx context.Context, b launcher.Backend, uid, gid uint32, dir string) *sandboxdv1.SelfTest {
	return &sandboxdv1.SelfTest{
		Ran:    timestamppb.Now(),
		Checks: []*sandboxdv1.SelfTestCheck{{Name: "supported", Detail: "no self-test for " + runtime.GOOS}},
	}
}

// RunProbeIfRequested has nothing to do: no self-test starts a probe on
// this OS.
func RunProbeIfRequested() {}

// CheckDir accepts any directory: Run does not use it on this OS.
func CheckDir(dir string, uid, gid uint32) error { return nil }
