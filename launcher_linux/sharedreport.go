package launcherlinux

import (
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/share"
)

// reports holds each enforcement report that some session still shows,
// so that sessions started under the same policy on the same host share
// one: with its denial sources, the workspace-write preset's report is
// about 1.1 KiB of the daemon's heap, which every idle session held a
// copy of. Nothing changes a report once its session runs.
var reports share.Table[sandboxdv1.EnforcementReport]

// sharedReport returns the report equal to r that is in use already, or
// r, which it keeps for the next.
func sharedReport(r *sandboxdv1.EnforcementReport) *sandboxdv1.EnforcementReport {
	shared, _ := share.Message(&reports, r, nil)
	return shared
}
