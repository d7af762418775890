package daemon

import (
	"fmt"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"golang.org/x/sys/windows"
)

// checkWriteRoots refuses write roots the caller does not own. The backend
// stamps write grants as LocalSystem, so without this check any caller
// could have the daemon make any directory writable to its sandbox. An
// owner may change its directory's DACL itself, so for what it owns the
// daemon does nothing the caller could not; administrators may do so
// anywhere. Child sessions are narrower than their parent and need no
// check of their own.
func checkWriteRoots(c Caller, p *sandboxdv1.Policy) error {
	if c.Admin {
		return nil
	}
	for i, w := range p.GetFilesystem().GetWrite() {
		sd, err := windows.GetNamedSecurityInfo(w, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION)
		if err != nil {
			return &RequestError{Field: fmt.Sprintf("filesystem.write[%d]", i), Msg: fmt.Sprintf("%s: reading its owner: %v", w, err)}
		}
		owner, _, err := sd.Owner()
		if err != nil || owner == nil {
			return fmt.Errorf("filesystem.write[%d] %s: no owner to compare with the caller: %w", i, w, ErrPermission)
		}
		if owner.String() != c.SID {
			return fmt.Errorf("filesystem.write[%d] %s is owned by %s, not by the caller %s: only an administrator may make another's directory writable: %w", i, w, owner, c.SID, ErrPermission)
		}
	}
	return nil
}
