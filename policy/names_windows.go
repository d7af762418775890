package policy

import "golang.org/x/sys/windows"

// everything is the write roots of a policy that may write everywhere:
// the system drive's root, since Windows has no single root. Not every
// fixed volume the host has: which drives happen to be mounted must not
// change what a preset means. One root is narrower, never wider, and the
// backend refuses a volume root as a write root in any case.
func everything() []string { return []string{systemDrive()} }

func systemDrive() string {
	d, err := windows.GetWindowsDirectory()
	if err != nil || len(d) < 2 {
		return `C:\`
	}
	return d[:2] + `\`
}
