package launcherwindows

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"unsafe"

	"github.com/tailscale/wf"
	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

var (
	modnetapi32                 = windows.NewLazySystemDLL("netapi32.dll")
	procNetUserAdd              = modnetapi32.NewProc("NetUserAdd")
	procNetUserSetInfo          = modnetapi32.NewProc("NetUserSetInfo")
	procNetUserDel              = modnetapi32.NewProc("NetUserDel")
	procNetLocalGroupAddMembers = modnetapi32.NewProc("NetLocalGroupAddMembers")

	procLsaOpenPolicy          = modadvapi32.NewProc("LsaOpenPolicy")
	procLsaAddAccountRights    = modadvapi32.NewProc("LsaAddAccountRights")
	procLsaRemoveAccountRights = modadvapi32.NewProc("LsaRemoveAccountRights")
	procLsaClose               = modadvapi32.NewProc("LsaClose")
	procLsaNtStatusToWinError  = modadvapi32.NewProc("LsaNtStatusToWinError")
)

// From lmaccess.h, lmerr.h, ntsecapi.h and fwpmu.h.
const (
	userPrivUser       = 1
	ufScript           = 0x1
	ufPasswdCantChange = 0x40
	ufNormalAccount    = 0x200
	ufDontExpirePasswd = 0x10000

	nerrUserNotFound   = 2221
	nerrUserExists     = 2224
	errorMemberInAlias = 1378

	policyCreateAccount = 0x10
	policyLookupNames   = 0x800

	fwpEAlreadyExists     = 0x80320009
	fwpEFilterNotFound    = 0x80320003
	fwpEProviderNotFound  = 0x80320005
	fwpESublayerNotFound  = 0x80320007
	sidBuiltinUsers       = "S-1-5-32-545"
	userListKey           = `SOFTWARE\Microsoft\Windows NT\CurrentVersion\Winlogon\SpecialAccounts\UserList`
	stateDirSDDL          = "O:BAD:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)"
	credentialSDDL        = "O:BAD:P(A;;FA;;;SY)(A;;FA;;;BA)"
	accountComment        = "sandboxd runs sandboxed commands as this account; do not use it"
	credentialDescription = "sandboxd sandbox user"
)

// sandboxUsers are the accounts Install provisions.
var sandboxUsers = []string{OfflineUser, OnlineUser}

// The logon rights of a sandbox user: a batch logon is how the backend
// logs it on, and nothing else may log it on, so its password, should it
// leak, opens no share, console or remote desktop session.
var (
	grantedRights = []string{"SeBatchLogonRight"}
	deniedRights  = []string{"SeDenyInteractiveLogonRight", "SeDenyNetworkLogonRight", "SeDenyRemoteInteractiveLogonRight", "SeDenyServiceLogonRight"}
)

// Install provisions the host for the backend, as an administrator:
// the state directory closed to everyone but SYSTEM and administrators,
// the two sandbox users with fresh random passwords kept DPAPI-protected
// in it, hidden from the logon screen and allowed only batch logons, and
// the persistent firewall filters that take the network from network NONE
// sandboxes. Run again, it resets the passwords and replaces the filters,
// so it also repairs.
func Install(stateDir string) error {
	if err := secureStateDir(stateDir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(stateDir, "users"), 0o700); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	for _, u := range sandboxUsers {
		if err := provisionUser(stateDir, u); err != nil {
			return fmt.Errorf("install: user %s: %w", u, err)
		}
	}
	offline, _, err := UserSIDs()
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if err := installFirewall(offline); err != nil {
		return fmt.Errorf("install: firewall filters: %w", err)
	}
	return nil
}

// secureStateDir creates the state directory, or takes over an existing
// one, owned by Administrators with a DACL of SYSTEM and Administrators
// only: the daemon keeps passwords and its journal there, and acts on the
// journal as SYSTEM.
func secureStateDir(dir string) error {
	sd, err := windows.SecurityDescriptorFromString(stateDirSDDL)
	if err != nil {
		return fmt.Errorf("install: state directory security descriptor: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	d16, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return fmt.Errorf("install: state directory %s: %w", dir, err)
	}
	sa := &windows.SecurityAttributes{SecurityDescriptor: sd}
	sa.Length = uint32(unsafe.Sizeof(*sa))
	err = windows.CreateDirectory(d16, sa)
	runtime.KeepAlive(sd)
	if err == nil {
		return nil
	}
	if !errors.Is(err, windows.ERROR_ALREADY_EXISTS) {
		return fmt.Errorf("install: create state directory %s: %w", dir, err)
	}
	owner, _, err := sd.Owner()
	if err != nil {
		return fmt.Errorf("install: state directory owner: %w", err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return fmt.Errorf("install: state directory DACL: %w", err)
	}
	// What someone else created in it before keeps its own explicit
	// entries; Uninstall and the probe of the journal's owner account for
	// that.
	err = windows.SetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT,
		windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION,
		owner, nil, dacl, nil)
	runtime.KeepAlive(sd)
	if err != nil {
		return fmt.Errorf("install: secure state directory %s: %w", dir, err)
	}
	return nil
}

// provisionUser creates user or resets its password and flags, keeps the
// password, hides the account and sets its logon rights.
func provisionUser(stateDir, user string) error {
	password, err := newPassword()
	if err != nil {
		return err
	}
	if err := createOrResetUser(user, password); err != nil {
		return err
	}
	sid, err := lookupUser(user)
	if err != nil {
		return err
	}
	if sid == nil {
		return fmt.Errorf("not found right after it was created")
	}
	if err := addToUsers(sid); err != nil {
		return err
	}
	if err := writeCredential(stateDir, user, password); err != nil {
		return err
	}
	if err := hideUser(user); err != nil {
		return err
	}
	return setLogonRights(sid)
}

// newPassword is 32 random bytes, base64url, with one character of each
// class appended: password complexity policies want three of upper case,
// lower case, digits and symbols, which random text only usually has.
func newPassword() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]) + "aA1!", nil
}

// userInfo1 is USER_INFO_1.
type userInfo1 struct {
	Name        *uint16
	Password    *uint16
	PasswordAge uint32
	Priv        uint32
	HomeDir     *uint16
	Comment     *uint16
	Flags       uint32
	ScriptPath  *uint16
}

const accountFlags = ufScript | ufNormalAccount | ufPasswdCantChange | ufDontExpirePasswd

func createOrResetUser(user, password string) error {
	name, err := windows.UTF16PtrFromString(user)
	if err != nil {
		return err
	}
	pw, err := windows.UTF16FromString(password)
	if err != nil {
		return err
	}
	defer clear(pw)
	comment, _ := windows.UTF16PtrFromString(accountComment)
	info := userInfo1{Name: name, Password: &pw[0], Priv: userPrivUser, Comment: comment, Flags: accountFlags}
	r, _, _ := procNetUserAdd.Call(0, 1, uintptr(unsafe.Pointer(&info)), 0)
	runtime.KeepAlive(pw)
	switch r {
	case 0:
		return nil
	case nerrUserExists:
	default:
		return fmt.Errorf("NetUserAdd: %w", windows.Errno(r))
	}
	// USER_INFO_1003 holds the password, USER_INFO_1008 the flags.
	pwInfo := struct{ Password *uint16 }{&pw[0]}
	if r, _, _ := procNetUserSetInfo.Call(0, uintptr(unsafe.Pointer(name)), 1003, uintptr(unsafe.Pointer(&pwInfo)), 0); r != 0 {
		return fmt.Errorf("NetUserSetInfo(password): %w", windows.Errno(r))
	}
	runtime.KeepAlive(pw)
	flagsInfo := struct{ Flags uint32 }{accountFlags}
	if r, _, _ := procNetUserSetInfo.Call(0, uintptr(unsafe.Pointer(name)), 1008, uintptr(unsafe.Pointer(&flagsInfo)), 0); r != 0 {
		return fmt.Errorf("NetUserSetInfo(flags): %w", windows.Errno(r))
	}
	return nil
}

// addToUsers puts the account in BUILTIN\Users, named by SID: the group's
// name depends on the display language.
func addToUsers(sid *windows.SID) error {
	users, err := windows.StringToSid(sidBuiltinUsers)
	if err != nil {
		return err
	}
	group, _, _, err := users.LookupAccount("")
	if err != nil {
		return fmt.Errorf("name of %s: %w", sidBuiltinUsers, err)
	}
	g16, err := windows.UTF16PtrFromString(group)
	if err != nil {
		return err
	}
	// LOCALGROUP_MEMBERS_INFO_0 holds only the SID.
	member := sid
	r, _, _ := procNetLocalGroupAddMembers.Call(0, uintptr(unsafe.Pointer(g16)), 0, uintptr(unsafe.Pointer(&member)), 1)
	runtime.KeepAlive(member)
	if r != 0 && r != errorMemberInAlias {
		return fmt.Errorf("NetLocalGroupAddMembers(%s): %w", group, windows.Errno(r))
	}
	return nil
}

func credentialPath(stateDir, user string) string {
	return filepath.Join(stateDir, "users", user+".cred")
}

// credentialEntropy ties a protected password to its user: one user's
// file copied over another's does not decrypt.
func credentialEntropy(user string) []byte {
	return []byte("sandboxd-credential:" + user)
}

// writeCredential keeps password DPAPI-protected with the machine's key,
// so that the service decrypts it whatever account it runs as, in a file
// only SYSTEM and administrators may open; any process of the machine
// could decrypt the blob, which is why the file's DACL is what guards it.
func writeCredential(stateDir, user, password string) error {
	plain := []byte(password)
	defer clear(plain)
	entropy := credentialEntropy(user)
	desc, _ := windows.UTF16PtrFromString(credentialDescription)
	in := windows.DataBlob{Size: uint32(len(plain)), Data: &plain[0]}
	ent := windows.DataBlob{Size: uint32(len(entropy)), Data: &entropy[0]}
	var out windows.DataBlob
	if err := windows.CryptProtectData(&in, desc, &ent, 0, nil, windows.CRYPTPROTECT_LOCAL_MACHINE|windows.CRYPTPROTECT_UI_FORBIDDEN, &out); err != nil {
		return fmt.Errorf("CryptProtectData: %w", err)
	}
	blob := append([]byte(nil), unsafe.Slice(out.Data, out.Size)...)
	windows.LocalFree(windows.Handle(unsafe.Pointer(out.Data)))
	return writeProtectedFile(credentialPath(stateDir, user), blob)
}

// writeProtectedFile replaces path by a file holding data, created with
// a DACL of SYSTEM and administrators only: a file created in place of
// an existing one would keep the old one's security descriptor.
func writeProtectedFile(path string, data []byte) error {
	sd, err := windows.SecurityDescriptorFromString(credentialSDDL)
	if err != nil {
		return fmt.Errorf("%s: security descriptor: %w", path, err)
	}
	tmp := path + ".new"
	t16, err := windows.UTF16PtrFromString(tmp)
	if err != nil {
		return err
	}
	p16, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return err
	}
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: %w", tmp, err)
	}
	sa := &windows.SecurityAttributes{SecurityDescriptor: sd}
	sa.Length = uint32(unsafe.Sizeof(*sa))
	h, err := windows.CreateFile(t16, windows.GENERIC_WRITE, 0, sa, windows.CREATE_NEW, windows.FILE_ATTRIBUTE_NORMAL, 0)
	runtime.KeepAlive(sd)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	f := os.NewFile(uintptr(h), tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = windows.MoveFileEx(t16, p16, windows.MOVEFILE_REPLACE_EXISTING|windows.MOVEFILE_WRITE_THROUGH)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// readCredential decrypts the password Install kept for user.
func readCredential(stateDir, user string) (string, error) {
	path := credentialPath(stateDir, user)
	blob, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if len(blob) == 0 {
		return "", fmt.Errorf("%s is empty", path)
	}
	entropy := credentialEntropy(user)
	in := windows.DataBlob{Size: uint32(len(blob)), Data: &blob[0]}
	ent := windows.DataBlob{Size: uint32(len(entropy)), Data: &entropy[0]}
	var out windows.DataBlob
	if err := windows.CryptUnprotectData(&in, nil, &ent, 0, nil, windows.CRYPTPROTECT_UI_FORBIDDEN, &out); err != nil {
		return "", fmt.Errorf("CryptUnprotectData(%s): %w", path, err)
	}
	plain := unsafe.Slice(out.Data, out.Size)
	password := string(plain)
	clear(plain)
	windows.LocalFree(windows.Handle(unsafe.Pointer(out.Data)))
	return password, nil
}

// hideUser keeps the account off the logon screen's list of users.
func hideUser(user string) error {
	k, _, err := registry.CreateKey(registry.LOCAL_MACHINE, userListKey, registry.SET_VALUE)
	if err != nil {
		return fmt.Errorf(`HKLM\%s: %w`, userListKey, err)
	}
	defer k.Close()
	if err := k.SetDWordValue(user, 0); err != nil {
		return fmt.Errorf(`HKLM\%s\%s: %w`, userListKey, user, err)
	}
	return nil
}

func unhideUser(user string) error {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, userListKey, registry.SET_VALUE)
	if errors.Is(err, windows.ERROR_FILE_NOT_FOUND) {
		return nil
	}
	if err != nil {
		return fmt.Errorf(`HKLM\%s: %w`, userListKey, err)
	}
	defer k.Close()
	if err := k.DeleteValue(user); err != nil && !errors.Is(err, windows.ERROR_FILE_NOT_FOUND) {
		return fmt.Errorf(`HKLM\%s\%s: %w`, userListKey, user, err)
	}
	return nil
}

// lsaUnicodeString is LSA_UNICODE_STRING.
type lsaUnicodeString struct {
	Length        uint16
	MaximumLength uint16
	Buffer        *uint16
}

// lsaObjectAttributes is LSA_OBJECT_ATTRIBUTES, which LsaOpenPolicy
// wants zeroed.
type lsaObjectAttributes struct {
	Length                   uint32
	RootDirectory            windows.Handle
	ObjectName               *lsaUnicodeString
	Attributes               uint32
	SecurityDescriptor       uintptr
	SecurityQualityOfService uintptr
}

func lsaError(status uintptr) error {
	r, _, _ := procLsaNtStatusToWinError.Call(status)
	return windows.Errno(r)
}

// withLSAPolicy runs f with a handle to the local security policy.
func withLSAPolicy(f func(policy uintptr) error) error {
	var attrs lsaObjectAttributes
	var policy uintptr
	if st, _, _ := procLsaOpenPolicy.Call(0, uintptr(unsafe.Pointer(&attrs)), policyCreateAccount|policyLookupNames,
		uintptr(unsafe.Pointer(&policy))); st != 0 {
		return fmt.Errorf("LsaOpenPolicy: %w", lsaError(st))
	}
	defer procLsaClose.Call(policy)
	return f(policy)
}

func lsaStrings(names []string) ([]lsaUnicodeString, [][]uint16, error) {
	out := make([]lsaUnicodeString, 0, len(names))
	keep := make([][]uint16, 0, len(names))
	for _, n := range names {
		u, err := windows.UTF16FromString(n)
		if err != nil {
			return nil, nil, err
		}
		size := uint16(2 * (len(u) - 1))
		out = append(out, lsaUnicodeString{Length: size, MaximumLength: size, Buffer: &u[0]})
		keep = append(keep, u)
	}
	return out, keep, nil
}

// setLogonRights grants the batch logon right and denies every other
// kind of logon to sid.
func setLogonRights(sid *windows.SID) error {
	rights, keep, err := lsaStrings(append(append([]string{}, grantedRights...), deniedRights...))
	if err != nil {
		return err
	}
	return withLSAPolicy(func(policy uintptr) error {
		st, _, _ := procLsaAddAccountRights.Call(policy, uintptr(unsafe.Pointer(sid)), uintptr(unsafe.Pointer(&rights[0])), uintptr(len(rights)))
		runtime.KeepAlive(keep)
		runtime.KeepAlive(sid)
		if st != 0 {
			return fmt.Errorf("LsaAddAccountRights: %w", lsaError(st))
		}
		return nil
	})
}

// clearLogonRights removes every right sid was given, so that no entry
// of a deleted account is left in the policy.
func clearLogonRights(sid *windows.SID) error {
	return withLSAPolicy(func(policy uintptr) error {
		st, _, _ := procLsaRemoveAccountRights.Call(policy, uintptr(unsafe.Pointer(sid)), 1, 0, 0)
		runtime.KeepAlive(sid)
		if st == 0 {
			return nil
		}
		if err := lsaError(st); !errors.Is(err, windows.ERROR_FILE_NOT_FOUND) {
			return fmt.Errorf("LsaRemoveAccountRights: %w", err)
		}
		return nil
	})
}

// lookupUser is the SID of local account user, nil when there is none.
func lookupUser(user string) (*windows.SID, error) {
	host, err := windows.ComputerName()
	if err != nil {
		return nil, fmt.Errorf("computer name: %w", err)
	}
	// Qualified by the computer, so a domain account of the same name is
	// never the one found.
	sid, _, typ, err := windows.LookupSID("", host+`\`+user)
	if errors.Is(err, windows.ERROR_NONE_MAPPED) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up %s: %w", user, err)
	}
	if typ != windows.SidTypeUser {
		return nil, fmt.Errorf(`%s\%s is not a user account (SID type %d)`, host, user, typ)
	}
	return sid, nil
}

// UserSIDs returns the SIDs of the sandbox users, "" for one that is not
// provisioned.
func UserSIDs() (offline, online string, err error) {
	var sids [2]string
	for i, u := range sandboxUsers {
		sid, err := lookupUser(u)
		if err != nil {
			return "", "", err
		}
		if sid != nil {
			sids[i] = sid.String()
		}
	}
	return sids[0], sids[1], nil
}

// installFirewall adds the provider, the sublayer and the filters that
// block every ALE layer for the network NONE tokens, all persistent, and
// replaces filters an earlier install left, whose user may have changed.
func installFirewall(offlineSID string) error {
	if offlineSID == "" {
		return errors.New("no SID for " + OfflineUser)
	}
	provider, sublayer, err := firewallIDs()
	if err != nil {
		return err
	}
	s, err := wf.New(&wf.Options{Name: "sandboxd install", Description: "adds sandboxd's network NONE filters"})
	if err != nil {
		return fmt.Errorf("open the filtering engine: %w", err)
	}
	defer s.Close()
	err = s.AddProvider(&wf.Provider{ID: provider, Name: FirewallProviderName, Description: "sandboxd sandboxes", Persistent: true})
	if err != nil && !errors.Is(err, windows.Errno(fwpEAlreadyExists)) {
		return fmt.Errorf("add provider %s: %w", FirewallProviderID, err)
	}
	err = s.AddSublayer(&wf.Sublayer{ID: sublayer, Name: FirewallSublayerName, Description: "blocks the network of network NONE sandboxes",
		Persistent: true, Provider: provider, Weight: FirewallSublayerWeight})
	if err != nil && !errors.Is(err, windows.Errno(fwpEAlreadyExists)) {
		return fmt.Errorf("add sublayer %s: %w", FirewallSublayerID, err)
	}
	layers, err := layerIDs(s)
	if err != nil {
		return err
	}
	for _, f := range FirewallFilters(offlineSID) {
		if err := addFilter(s, f, layers, provider, sublayer); err != nil {
			return err
		}
	}
	return nil
}

func addFilter(s *wf.Session, f Filter, layers map[string]wf.LayerID, provider wf.ProviderID, sublayer wf.SublayerID) error {
	if f.Action != FirewallAction {
		return fmt.Errorf("filter %s: action %q, only %q is known", f.ID, f.Action, FirewallAction)
	}
	layer, ok := layers[f.Layer]
	if !ok {
		return fmt.Errorf("filter %s: this Windows has no layer %s", f.ID, f.Layer)
	}
	id, err := windows.GUIDFromString(f.ID)
	if err != nil {
		return fmt.Errorf("filter id %s: %w", f.ID, err)
	}
	sd, err := windows.SecurityDescriptorFromString(f.UserSDDL)
	if err != nil {
		return fmt.Errorf("filter %s: user condition %q: %w", f.ID, f.UserSDDL, err)
	}
	if err := s.DeleteRule(wf.RuleID(id)); err != nil && !errors.Is(err, windows.Errno(fwpEFilterNotFound)) {
		return fmt.Errorf("replace filter %s: %w", f.ID, err)
	}
	err = s.AddRule(&wf.Rule{
		ID: wf.RuleID(id), Name: f.Name, Layer: layer, Sublayer: sublayer, Provider: provider,
		Conditions: []*wf.Match{{Field: wf.FieldALEUserID, Op: wf.MatchTypeEqual, Value: sd}},
		Action:     wf.ActionBlock,
		// Only a veto overrides a hard block: no other sublayer's permit
		// lets a network NONE token through.
		HardAction: true,
		Persistent: true,
	})
	if err != nil {
		return fmt.Errorf("add filter %s (%s): %w", f.ID, f.Layer, err)
	}
	return nil
}

func firewallIDs() (wf.ProviderID, wf.SublayerID, error) {
	p, err := windows.GUIDFromString(FirewallProviderID)
	if err != nil {
		return wf.ProviderID{}, wf.SublayerID{}, fmt.Errorf("provider id: %w", err)
	}
	s, err := windows.GUIDFromString(FirewallSublayerID)
	if err != nil {
		return wf.ProviderID{}, wf.SublayerID{}, fmt.Errorf("sublayer id: %w", err)
	}
	return wf.ProviderID(p), wf.SublayerID(s), nil
}

// layerIDs maps the names the plan uses (ALE_AUTH_CONNECT_V4, ...) to the
// layers of this Windows.
func layerIDs(s *wf.Session) (map[string]wf.LayerID, error) {
	ls, err := s.Layers()
	if err != nil {
		return nil, fmt.Errorf("list the filtering layers: %w", err)
	}
	out := make(map[string]wf.LayerID, len(ls))
	for _, l := range ls {
		out[l.ID.String()] = l.ID
	}
	return out, nil
}

// Uninstall undoes Install and what the backend left: the persistent ACL
// entries the journal lists and any session the journal still holds, the
// filters, sublayer and provider, the users with their rights and
// passwords. The daemon must have stopped. It goes on past a failed step
// so that one problem does not leave everything else behind, and reports
// every failure.
func Uninstall(stateDir string) error {
	var errs []error
	if j, err := OpenJournal(filepath.Join(stateDir, journalName)); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, sweepSessions(j, stateDir))
		for _, a := range j.Persistent() {
			if err := unstampACE(a); err != nil {
				errs = append(errs, fmt.Errorf("remove the entry for %s on %s: %w", a.SID, a.Path, err))
				continue
			}
			errs = append(errs, j.ForgetPersistent(a))
		}
		if len(j.Persistent()) == 0 && len(j.Sessions()) == 0 {
			if err := os.Remove(j.Path()); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, uninstallFirewall())
	for _, u := range sandboxUsers {
		errs = append(errs, removeUser(stateDir, u))
	}
	if err := os.Remove(filepath.Join(stateDir, "users")); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if err := os.Remove(filepath.Join(stateDir, tempRoot)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("uninstall: %w", err)
	}
	return nil
}

func removeUser(stateDir, user string) error {
	var errs []error
	sid, err := lookupUser(user)
	if err != nil {
		errs = append(errs, err)
	}
	if sid != nil {
		errs = append(errs, clearLogonRights(sid))
		name, err := windows.UTF16PtrFromString(user)
		if err != nil {
			return err
		}
		if r, _, _ := procNetUserDel.Call(0, uintptr(unsafe.Pointer(name))); r != 0 && r != nerrUserNotFound {
			errs = append(errs, fmt.Errorf("NetUserDel(%s): %w", user, windows.Errno(r)))
		}
	}
	errs = append(errs, unhideUser(user))
	if err := os.Remove(credentialPath(stateDir, user)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func uninstallFirewall() error {
	provider, sublayer, err := firewallIDs()
	if err != nil {
		return err
	}
	s, err := wf.New(&wf.Options{Name: "sandboxd uninstall", Description: "removes sandboxd's network NONE filters"})
	if err != nil {
		return fmt.Errorf("open the filtering engine: %w", err)
	}
	defer s.Close()
	var errs []error
	// The filter ids depend on the layer only, not on the user.
	for _, f := range FirewallFilters("") {
		id, err := windows.GUIDFromString(f.ID)
		if err != nil {
			errs = append(errs, fmt.Errorf("filter id %s: %w", f.ID, err))
			continue
		}
		if err := s.DeleteRule(wf.RuleID(id)); err != nil && !errors.Is(err, windows.Errno(fwpEFilterNotFound)) {
			errs = append(errs, fmt.Errorf("delete filter %s: %w", f.ID, err))
		}
	}
	if err := s.DeleteSublayer(sublayer); err != nil && !errors.Is(err, windows.Errno(fwpESublayerNotFound)) {
		errs = append(errs, fmt.Errorf("delete sublayer %s: %w", FirewallSublayerID, err))
	}
	if err := s.DeleteProvider(provider); err != nil && !errors.Is(err, windows.Errno(fwpEProviderNotFound)) {
		errs = append(errs, fmt.Errorf("delete provider %s: %w", FirewallProviderID, err))
	}
	return errors.Join(errs...)
}
