package launcherwindows

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"strings"
)

// Well-known SIDs the plan names.
const (
	// SIDBuiltinAdministrators is BUILTIN\Administrators.
	SIDBuiltinAdministrators = "S-1-5-32-544"
	// SIDLocalAccountAndAdministrator is NT AUTHORITY\Local account and
	// member of Administrators group.
	SIDLocalAccountAndAdministrator = "S-1-5-114"
	// SIDRestrictedCode is NT AUTHORITY\RESTRICTED, which device objects
	// such as NUL grant to restricted tokens.
	SIDRestrictedCode = "S-1-5-12"
	// SIDAuthenticatedUsers is NT AUTHORITY\Authenticated Users, which
	// directories made below a volume's root grant Modify: made deny-only,
	// it cannot give the sandbox DELETE there, a right the restricting pass
	// of a write-restricted token does not check.
	SIDAuthenticatedUsers = "S-1-5-11"
	// SIDLocalSystem, SIDLocalService and SIDNetworkService are the
	// service accounts, which no sandbox token holds.
	SIDLocalSystem    = "S-1-5-18"
	SIDLocalService   = "S-1-5-19"
	SIDNetworkService = "S-1-5-20"
	// SIDMediumIntegrity is the Medium mandatory level.
	SIDMediumIntegrity = "S-1-16-8192"
	// SIDOwnerRights is OWNER RIGHTS: an entry for it replaces the
	// READ_CONTROL and WRITE_DAC an object's owner otherwise holds
	// before any entry is read.
	SIDOwnerRights = "S-1-3-4"
)

// derivedSIDPrefix is the authority and first sub-authority of capability
// SIDs derived from a name: no account or group on any machine has one.
const derivedSIDPrefix = "S-1-15-3-1024"

// NetworkNoneSID is DeriveSID("sandboxd-network:none"), spelled out so it
// can be a constant: the firewall filters match it as well as the offline
// user, so a token carrying it has no network whoever it runs as.
const NetworkNoneSID = "S-1-15-3-1024-2590905653-2477285395-2143033006-376668613-2554066343-1896568758-1107299686-885263978"

// DeriveSID is the SID sandboxd uses for name: S-1-15-3-1024 followed by
// the SHA-256 of name as eight little-endian 32-bit sub-authorities, the
// shape of a capability SID. The same name gives the same SID on every
// host and in every release, so persistent ACEs keyed on it stay valid.
func DeriveSID(name string) string {
	sum := sha256.Sum256([]byte(name))
	var b strings.Builder
	b.WriteString(derivedSIDPrefix)
	for i := 0; i < len(sum); i += 4 {
		b.WriteByte('-')
		b.WriteString(strconv.FormatUint(uint64(binary.LittleEndian.Uint32(sum[i:])), 10))
	}
	return b.String()
}

// WriteRootSID is the restricting SID that grants writes below path.
func WriteRootSID(path string) string {
	return DeriveSID("sandboxd-write-root:" + pathKey(path))
}

// SessionSID is the restricting SID the session pipe of session id grants:
// the daemon makes the pipe before the session's logon SID exists.
func SessionSID(id string) string {
	return DeriveSID("sandboxd-session:" + id)
}

// isSID reports whether s has the shape of a SID string: S-1, an
// authority and at least one sub-authority, all decimal. SIDs are written
// into security descriptors, where anything else could change their
// meaning.
func isSID(s string) bool {
	rest, ok := strings.CutPrefix(s, "S-1-")
	if !ok {
		return false
	}
	parts := strings.Split(rest, "-")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, 64); err != nil {
			return false
		}
	}
	return true
}
