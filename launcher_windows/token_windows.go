package launcherwindows

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/windows"
)

var (
	modadvapi32               = windows.NewLazySystemDLL("advapi32.dll")
	procLogonUserW            = modadvapi32.NewProc("LogonUserW")
	procCreateRestrictedToken = modadvapi32.NewProc("CreateRestrictedToken")
)

// From winbase.h and winnt.h.
const (
	logon32LogonBatch      = 4
	logon32ProviderDefault = 0
	disableMaxPrivilege    = 0x1
	writeRestricted        = 0x8
)

// logonUser logs the local account user on as a batch job: every call is a
// new logon session with a logon SID of its own, which is what the
// session's ACEs are keyed on. The result is a primary token.
func logonUser(user, password string) (windows.Token, error) {
	u, err := windows.UTF16PtrFromString(user)
	if err != nil {
		return 0, fmt.Errorf("log on %s: %w", user, err)
	}
	p, err := windows.UTF16FromString(password)
	if err != nil {
		return 0, fmt.Errorf("log on %s: %w", user, err)
	}
	// Only the local account database: a domain account of the same
	// name must never be the one logged on.
	dot, _ := windows.UTF16PtrFromString(".")
	var t windows.Token
	r, _, e := procLogonUserW.Call(uintptr(unsafe.Pointer(u)), uintptr(unsafe.Pointer(dot)), uintptr(unsafe.Pointer(&p[0])),
		logon32LogonBatch, logon32ProviderDefault, uintptr(unsafe.Pointer(&t)))
	clear(p)
	runtime.KeepAlive(p)
	if r == 0 {
		return 0, fmt.Errorf("LogonUser(%s, LOGON32_LOGON_BATCH): %w", user, e)
	}
	return t, nil
}

// logonSID is the SID of the logon session t belongs to, found among its
// groups by the SE_GROUP_LOGON_ID attribute.
func logonSID(t windows.Token) (string, error) {
	groups, err := t.GetTokenGroups()
	if err != nil {
		return "", fmt.Errorf("read the logon token's groups: %w", err)
	}
	for _, g := range groups.AllGroups() {
		if g.Attributes&windows.SE_GROUP_LOGON_ID == windows.SE_GROUP_LOGON_ID {
			return g.Sid.String(), nil
		}
	}
	return "", errors.New("the logon token has no logon SID")
}

// sidList converts SID strings, logonSID standing in for LogonSID, into
// the SID_AND_ATTRIBUTES array CreateRestrictedToken takes. The SIDs are
// on the Go heap and referenced from the array, which the caller keeps
// alive across the call.
func sidList(sids []string, logon string) ([]windows.SIDAndAttributes, error) {
	out := make([]windows.SIDAndAttributes, 0, len(sids))
	for _, s := range sids {
		if s == LogonSID {
			s = logon
		}
		sid, err := windows.StringToSid(s)
		if err != nil {
			return nil, fmt.Errorf("SID %q: %w", s, err)
		}
		out = append(out, windows.SIDAndAttributes{Sid: sid})
	}
	return out, nil
}

// restrictToken makes the session's primary token from the logon token
// as plan spec says: privileges dropped but bypass traverse checking,
// administrators deny-only, writes needing a restricting SID, the
// integrity level and the default DACL of what the sandbox creates.
func restrictToken(logon windows.Token, spec Token, logonSIDString string) (windows.Token, error) {
	var flags uintptr
	if spec.DisableMaxPrivilege {
		flags |= disableMaxPrivilege
	}
	if spec.WriteRestricted {
		flags |= writeRestricted
	}
	disable, err := sidList(spec.DenyOnly, logonSIDString)
	if err != nil {
		return 0, fmt.Errorf("restrict the token: deny-only %w", err)
	}
	restrict, err := sidList(spec.Restricting, logonSIDString)
	if err != nil {
		return 0, fmt.Errorf("restrict the token: restricting %w", err)
	}
	var t windows.Token
	r, _, e := procCreateRestrictedToken.Call(uintptr(logon), flags,
		uintptr(len(disable)), sliceAddr(disable),
		0, 0,
		uintptr(len(restrict)), sliceAddr(restrict),
		uintptr(unsafe.Pointer(&t)))
	runtime.KeepAlive(disable)
	runtime.KeepAlive(restrict)
	if r == 0 {
		return 0, fmt.Errorf("CreateRestrictedToken: %w", e)
	}
	if err := setIntegrity(t, spec.IntegrityLevel); err != nil {
		t.Close()
		return 0, err
	}
	if err := setDefaultDACL(t, spec.DefaultDACL, logonSIDString); err != nil {
		t.Close()
		return 0, err
	}
	return t, nil
}

func sliceAddr(s []windows.SIDAndAttributes) uintptr {
	if len(s) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&s[0]))
}

// setIntegrity sets the mandatory label of t: the logon token of a
// standard user has the level already, but the plan's is stated, not
// assumed.
func setIntegrity(t windows.Token, level string) error {
	sid, err := windows.StringToSid(level)
	if err != nil {
		return fmt.Errorf("integrity level %q: %w", level, err)
	}
	tml := windows.Tokenmandatorylabel{Label: windows.SIDAndAttributes{Sid: sid, Attributes: windows.SE_GROUP_INTEGRITY}}
	err = windows.SetTokenInformation(t, windows.TokenIntegrityLevel, (*byte)(unsafe.Pointer(&tml)), tml.Size())
	runtime.KeepAlive(sid)
	if err != nil {
		return fmt.Errorf("SetTokenInformation(TokenIntegrityLevel, %s): %w", level, err)
	}
	return nil
}

// tokenDefaultDACL is TOKEN_DEFAULT_DACL.
type tokenDefaultDACL struct {
	DefaultDacl *windows.ACL
}

// setDefaultDACL sets the DACL every object the sandbox creates without
// a security descriptor of its own gets, its processes and threads among
// them.
func setDefaultDACL(t windows.Token, sddl, logon string) error {
	sddl = strings.ReplaceAll(sddl, ";"+LogonSID+")", ";"+logon+")")
	if strings.Contains(sddl, LogonSID) {
		return fmt.Errorf("default DACL %q: %s is not where a SID goes", sddl, LogonSID)
	}
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return fmt.Errorf("default DACL %q: %w", sddl, err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return fmt.Errorf("default DACL %q: %w", sddl, err)
	}
	info := tokenDefaultDACL{DefaultDacl: dacl}
	err = windows.SetTokenInformation(t, windows.TokenDefaultDacl, (*byte)(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)))
	runtime.KeepAlive(sd)
	if err != nil {
		return fmt.Errorf("SetTokenInformation(TokenDefaultDacl, %s): %w", sddl, err)
	}
	return nil
}

// asSandbox runs f on a thread impersonating t, so that what f opens is
// checked exactly as the sandbox's own opens will be: its deny ACEs, its
// restricting SIDs, its integrity level.
func asSandbox(t windows.Token, f func() error) error {
	var imp windows.Token
	if err := windows.DuplicateTokenEx(t, windows.TOKEN_QUERY|windows.TOKEN_IMPERSONATE, nil,
		windows.SecurityImpersonation, windows.TokenImpersonation, &imp); err != nil {
		return fmt.Errorf("impersonation token: %w", err)
	}
	defer imp.Close()
	runtime.LockOSThread()
	if err := windows.SetThreadToken(nil, imp); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("impersonate the sandbox: %w", err)
	}
	ferr := f()
	if err := windows.RevertToSelf(); err != nil {
		// The thread still wears the sandbox's token: left locked, it
		// ends with this goroutine instead of running someone else's.
		return errors.Join(ferr, fmt.Errorf("stop impersonating the sandbox: %w", err))
	}
	runtime.UnlockOSThread()
	return ferr
}
