package launcherlinux

import (
	"strconv"
	"strings"
)

// identityFiles are the sandbox's /etc/passwd and /etc/group: the host's
// (passwd, group) with an entry for uid and gid where they have none, so
// that the sandbox's uid has a name (shells do not say "I have no name!")
// and the C library's lookups end in the files instead of going on to
// services the sandbox cannot reach. "" is a file that needs no change.
// The entry is "sandbox", or "sandbox-UID" where the host has a sandbox
// of another id; its home is "/", as the daemon's HOME for an unnamed uid.
func identityFiles(passwd, group string, uid, gid uint32) (sbPasswd, sbGroup string) {
	u, g := strconv.FormatUint(uint64(uid), 10), strconv.FormatUint(uint64(gid), 10)
	if !hasID(passwd, u) {
		name := freeName(passwd, u)
		sbPasswd = withLine(passwd, name+":x:"+u+":"+g+":sandboxd sandbox:/:/bin/sh")
	}
	if !hasID(group, g) {
		sbGroup = withLine(group, freeName(group, g)+":x:"+g+":")
	}
	return sbPasswd, sbGroup
}

// hasID reports whether a passwd or group file has an entry with id in its
// third field.
func hasID(file, id string) bool {
	for _, line := range strings.Split(file, "\n") {
		if f := strings.SplitN(line, ":", 4); len(f) >= 3 && f[2] == id {
			return true
		}
	}
	return false
}

func freeName(file, id string) string {
	for _, line := range strings.Split(file, "\n") {
		if strings.HasPrefix(line, "sandbox:") {
			return "sandbox-" + id
		}
	}
	return "sandbox"
}

func withLine(file, line string) string {
	if file != "" && !strings.HasSuffix(file, "\n") {
		file += "\n"
	}
	return file + line + "\n"
}
