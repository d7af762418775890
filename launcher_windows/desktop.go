package launcherwindows

import (
	"fmt"
	"strings"
)

// WindowStationName is the window station the daemon creates once for
// every sandbox, apart from the interactive user's.
const WindowStationName = "sandboxd"

// DesktopName is the desktop sandboxed processes run on, as
// STARTUPINFO.lpDesktop spells it: window station, backslash, desktop.
// Programs that load user32 need a desktop; one of the daemon's own keeps
// them away from the user's windows and input.
const DesktopName = WindowStationName + `\default`

// Window station and desktop access rights, as the Windows SDK defines
// them.
const (
	winstaEnumDesktops      uint32 = 0x1
	winstaReadAttributes    uint32 = 0x2
	winstaAccessGlobalAtoms uint32 = 0x20

	desktopReadObjects  uint32 = 0x1
	desktopCreateWindow uint32 = 0x2
	desktopCreateMenu   uint32 = 0x4
	desktopWriteObjects uint32 = 0x80
)

// windowStationUse is what connecting a process to the window station
// takes. Not the clipboard, not enumerating other window stations, not
// creating desktops, not logging off.
const windowStationUse = winstaEnumDesktops | winstaReadAttributes | winstaAccessGlobalAtoms | READ_CONTROL

// desktopUse is what creating windows and menus on the desktop takes. Not
// hooks or journaling, which would reach the windows of other sessions
// sharing it, and not switching desktops.
const desktopUse = desktopReadObjects | desktopCreateWindow | desktopCreateMenu | desktopWriteObjects | READ_CONTROL

// WindowStationSDDL is the security descriptor of the window station
// WindowStationName: SYSTEM in full, the sandbox users and RESTRICTED the
// rights to use it. RESTRICTED is what a write-restricted token's
// restricting pass is granted by.
func WindowStationSDDL(userSIDs []string) string {
	return userObjectSDDL(windowStationUse, userSIDs)
}

// DesktopSDDL is the security descriptor of the desktop DesktopName, with
// the same grantees as WindowStationSDDL.
func DesktopSDDL(userSIDs []string) string {
	return userObjectSDDL(desktopUse, userSIDs)
}

func userObjectSDDL(use uint32, userSIDs []string) string {
	var b strings.Builder
	b.WriteString("D:P(A;;GA;;;SY)")
	for _, sid := range userSIDs {
		if sid != "" {
			fmt.Fprintf(&b, "(A;;0x%x;;;%s)", use, sid)
		}
	}
	fmt.Fprintf(&b, "(A;;0x%x;;;RC)", use)
	return b.String()
}
