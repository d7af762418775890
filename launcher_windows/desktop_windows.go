package launcherwindows

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
)

var (
	moduser32                   = windows.NewLazySystemDLL("user32.dll")
	procCreateWindowStationW    = moduser32.NewProc("CreateWindowStationW")
	procCreateDesktopW          = moduser32.NewProc("CreateDesktopW")
	procGetProcessWindowStation = moduser32.NewProc("GetProcessWindowStation")
	procSetProcessWindowStation = moduser32.NewProc("SetProcessWindowStation")
	procCloseWindowStation      = moduser32.NewProc("CloseWindowStation")
	procCloseDesktop            = moduser32.NewProc("CloseDesktop")
)

// From winuser.h: every specific right, and the standard ones the daemon
// needs to set the DACL.
const (
	winstaAllAccess  = 0x37f | windows.STANDARD_RIGHTS_REQUIRED
	desktopAllAccess = 0x1ff | windows.STANDARD_RIGHTS_REQUIRED
)

// desktop is the window station and desktop every sandbox runs on. The
// daemon holds both handles for as long as it runs: a window station or
// desktop goes away with its last handle.
type desktop struct {
	mu      sync.Mutex
	winsta  windows.Handle
	desktop windows.Handle
	// sids are the users the DACLs admit.
	sids []string
}

// ensure makes the window station and desktop the first time a session
// needs them, granting what userSIDs need to use them, and grants it
// anew when the users changed (provisioned again while the daemon ran).
// A failure is retried by the next session rather than remembered.
func (d *desktop) ensure(userSIDs []string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.desktop != 0 {
		if slices.Equal(d.sids, userSIDs) {
			return nil
		}
		if err := setUserObjectDACL(d.winsta, WindowStationSDDL(userSIDs)); err != nil {
			return fmt.Errorf("window station %s: %w", WindowStationName, err)
		}
		if err := setUserObjectDACL(d.desktop, DesktopSDDL(userSIDs)); err != nil {
			return fmt.Errorf("desktop %s: %w", DesktopName, err)
		}
		d.sids = slices.Clone(userSIDs)
		return nil
	}
	station, name, ok := strings.Cut(DesktopName, `\`)
	if !ok {
		return fmt.Errorf("desktop %q names no window station", DesktopName)
	}
	ws, err := createWindowStation(station, WindowStationSDDL(userSIDs))
	if err != nil {
		return err
	}
	dt, err := createDesktopOn(ws, name, DesktopSDDL(userSIDs))
	if err != nil {
		procCloseWindowStation.Call(uintptr(ws))
		return err
	}
	d.winsta, d.desktop, d.sids = ws, dt, slices.Clone(userSIDs)
	return nil
}

// createWindowStation creates the window station, or opens it if an
// earlier daemon's still exists, and gives it the DACL sddl either way.
func createWindowStation(name, sddl string) (windows.Handle, error) {
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return 0, fmt.Errorf("window station %q: %w", name, err)
	}
	r, _, e := procCreateWindowStationW.Call(uintptr(unsafe.Pointer(n)), 0, winstaAllAccess, 0)
	if r == 0 {
		return 0, fmt.Errorf("CreateWindowStation(%s): %w", name, e)
	}
	h := windows.Handle(r)
	if err := setUserObjectDACL(h, sddl); err != nil {
		procCloseWindowStation.Call(r)
		return 0, fmt.Errorf("window station %s: %w", name, err)
	}
	return h, nil
}

// createDesktopOn creates desktop name on window station ws, or opens it,
// and gives it the DACL sddl. CreateDesktop works on the calling process's
// window station, so the process is moved to ws for the call and back.
func createDesktopOn(ws windows.Handle, name, sddl string) (windows.Handle, error) {
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return 0, fmt.Errorf("desktop %q: %w", name, err)
	}
	old, _, e := procGetProcessWindowStation.Call()
	if old == 0 {
		return 0, fmt.Errorf("GetProcessWindowStation: %w", e)
	}
	if r, _, e := procSetProcessWindowStation.Call(uintptr(ws)); r == 0 {
		return 0, fmt.Errorf("SetProcessWindowStation(%s): %w", WindowStationName, e)
	}
	r, _, createErr := procCreateDesktopW.Call(uintptr(unsafe.Pointer(n)), 0, 0, 0, desktopAllAccess, 0)
	var restoreErr error
	if ok, _, e := procSetProcessWindowStation.Call(old); ok == 0 {
		restoreErr = fmt.Errorf("SetProcessWindowStation back to the daemon's own: %w", e)
	}
	if r == 0 {
		return 0, errors.Join(fmt.Errorf("CreateDesktop(%s): %w", name, createErr), restoreErr)
	}
	h := windows.Handle(r)
	if restoreErr != nil {
		procCloseDesktop.Call(r)
		return 0, restoreErr
	}
	if err := setUserObjectDACL(h, sddl); err != nil {
		procCloseDesktop.Call(r)
		return 0, fmt.Errorf("desktop %s: %w", name, err)
	}
	return h, nil
}

// setUserObjectDACL replaces the DACL of a window station or desktop by
// the one of sddl, protected from inheritance.
func setUserObjectDACL(h windows.Handle, sddl string) error {
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return fmt.Errorf("security descriptor %q: %w", sddl, err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return fmt.Errorf("security descriptor %q: %w", sddl, err)
	}
	err = windows.SetSecurityInfo(h, windows.SE_WINDOW_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil)
	runtime.KeepAlive(sd)
	if err != nil {
		return fmt.Errorf("SetSecurityInfo(DACL %s): %w", sddl, err)
	}
	return nil
}
