package daemon

import (
	"errors"
	"os"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"golang.org/x/sys/windows"
)

func TestWriteRootsMustBeTheCallers(t *testing.T) {
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		t.Fatal(err)
	}
	me := u.User.Sid.String()
	own := t.TempDir()
	// The system directory belongs to TrustedInstaller, never to a caller.
	sys, err := windows.GetSystemDirectory()
	if err != nil {
		t.Fatal(err)
	}
	write := func(paths ...string) *sandboxdv1.Policy {
		return &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: paths}}
	}
	// A directory made by an elevated administrator is owned by
	// Administrators, not by the user: stamp it as the user's own.
	sd, err := windows.GetNamedSecurityInfo(own, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION)
	if err != nil {
		t.Fatal(err)
	}
	if owner, _, err := sd.Owner(); err != nil || owner.String() != me {
		if err := windows.SetNamedSecurityInfo(own, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION, u.User.Sid, nil, nil, nil); err != nil {
			t.Skipf("cannot make %s the test user's own: %v", own, err)
		}
	}
	if err := checkWriteRoots(Caller{SID: me}, write(own)); err != nil {
		t.Errorf("a write root the caller owns: %v", err)
	}
	if err := checkWriteRoots(Caller{SID: me}, write(own, sys)); !errors.Is(err, ErrPermission) {
		t.Errorf("a write root owned by another: got %v, want ErrPermission", err)
	}
	if err := checkWriteRoots(Caller{SID: me, Admin: true}, write(sys)); err != nil {
		t.Errorf("an administrator's write root: %v", err)
	}
	// A deny path outside the write roots is stamped too: only its owner
	// may have it stamped (issue 29 item 5).
	denyOutside := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{own}, Deny: []string{sys}}}
	if err := checkWriteRoots(Caller{SID: me}, denyOutside); !errors.Is(err, ErrPermission) {
		t.Errorf("a deny path outside the write roots owned by another: got %v, want ErrPermission", err)
	}
	missingOutside := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{own}, ReadOnly: []string{sys + `\sandboxd-missing`}}}
	if err := checkWriteRoots(Caller{SID: me}, missingOutside); err != nil {
		t.Errorf("a missing carve-out outside the write roots, which is not stamped: %v", err)
	}
	var re *RequestError
	if err := checkWriteRoots(Caller{SID: me}, write(own+`\missing`)); !errors.As(err, &re) {
		t.Errorf("a missing write root: got %v, want a RequestError", err)
	}
	_ = os.Remove(own)
}
