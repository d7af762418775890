package daemon

import (
	"errors"
	"fmt"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	launcherwindows "github.com/sandboxd/sandboxd/launcher_windows"
	"golang.org/x/sys/windows"
)

// checkWriteRoots refuses policy paths the caller does not own where the
// backend would stamp ACL entries on them: write roots, and carve-outs and
// deny paths outside the write roots (launcherwindows.OwnershipChecks).
// The backend stamps as LocalSystem, so without this check any caller
// could have the daemon make any directory writable to its sandbox, or
// rewrite the ACL of any path through a deny entry. An owner may change
// its directory's DACL itself, so for what it owns the daemon does nothing
// the caller could not; administrators may do so anywhere. Child sessions
// are narrower than their parent by path and need no check of their own:
// the backend stamps no path that leads elsewhere through a junction, a
// symbolic link or a short name, nor a file with another name (a hard
// link), whose DACL that name shares.
func checkWriteRoots(c Caller, p *sandboxdv1.Policy) error {
	if c.Admin {
		return nil
	}
	for _, chk := range launcherwindows.OwnershipChecks(p) {
		sd, err := windows.GetNamedSecurityInfo(chk.Path, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION)
		if !chk.MustExist && (errors.Is(err, windows.ERROR_FILE_NOT_FOUND) || errors.Is(err, windows.ERROR_PATH_NOT_FOUND)) {
			// Outside every write root, a missing path is not stamped.
			continue
		}
		if err != nil {
			return &RequestError{Field: chk.Field, Msg: fmt.Sprintf("%s: reading its owner: %v", chk.Path, err)}
		}
		owner, _, err := sd.Owner()
		if err != nil || owner == nil {
			return fmt.Errorf("%s %s: no owner to compare with the caller: %w", chk.Field, chk.Path, ErrPermission)
		}
		if owner.String() != c.SID {
			return fmt.Errorf("%s %s is owned by %s, not by the caller %s: only an administrator may have the service change another's ACL: %w", chk.Field, chk.Path, owner, c.SID, ErrPermission)
		}
	}
	return nil
}
