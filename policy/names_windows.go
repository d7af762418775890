package policy

import (
	"strings"

	"golang.org/x/sys/windows"
)

// everything is the write roots of a policy that may write everywhere: the
// root of every fixed volume, since Windows has no single root. Without the
// list the system drive alone stands for it, which is narrower, never wider.
func everything() []string {
	buf := make([]uint16, 512)
	n, err := windows.GetLogicalDriveStrings(uint32(len(buf)), &buf[0])
	if err != nil || int(n) > len(buf) {
		return []string{systemDrive()}
	}
	var roots []string
	for _, r := range strings.Split(windows.UTF16ToString(buf[:n]), "\x00") {
		if r == "" {
			continue
		}
		if windows.GetDriveType(windows.StringToUTF16Ptr(r)) == windows.DRIVE_FIXED {
			roots = append(roots, r)
		}
	}
	if len(roots) == 0 {
		return []string{systemDrive()}
	}
	return roots
}

func systemDrive() string {
	d, err := windows.GetWindowsDirectory()
	if err != nil || len(d) < 2 {
		return `C:\`
	}
	return d[:2] + `\`
}
