package launcherwindows

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/windows"
)

var procIsValidAcl = modadvapi32.NewProc("IsValidAcl")

// errNotThere says a path stamped earlier no longer exists: nothing is
// left to remove from it.
var errNotThere = errors.New("no longer exists")

// stampACE adds a to the DACL of its path as an explicit entry, in
// canonical order; present reports that the same entry was there
// already, which leaves the DACL untouched. Windows then propagates an
// inheritable entry to everything below the path.
func stampACE(a StampedACE) (present bool, err error) {
	ace, err := stampedEntry(a)
	if err != nil {
		return false, err
	}
	err = editDACL(a.Path, true, func(acl []byte) ([]byte, error) {
		out, p, err := aclWith(acl, ace)
		present = p
		return out, err
	})
	return present, err
}

// unstampACE removes the explicit entry a from the DACL of its path, and
// Windows its inherited copies from everything below. A path or entry
// already gone is not an error.
func unstampACE(a StampedACE) error {
	ace, err := stampedEntry(a)
	if err != nil {
		return err
	}
	err = editDACL(a.Path, false, func(acl []byte) ([]byte, error) {
		out, _, err := aclWithout(acl, ace)
		return out, err
	})
	if errors.Is(err, errNotThere) {
		return nil
	}
	return err
}

func stampedEntry(a StampedACE) ([]byte, error) {
	sid, err := sidBinary(a.SID)
	if err != nil {
		return nil, err
	}
	return aceBinary(a.Allow, a.Inherit, a.Mask, sid), nil
}

// editDACL replaces the DACL of path by what edit makes of it; edit
// returning nil leaves it as it is. The object is opened once and edited
// through that handle, after checking that the path reaches it without a
// reparse point: a junction or symbolic link put in its place would make
// the daemon, which may change any DACL, change the one of whatever it
// points at. Adding, it must be a directory or a file of one name: a hard
// link shares its DACL with every other name of the file, wherever that
// lies (the planner checked by path, Kind; this is the object edited).
// Removing an entry stamped before is done whatever the count.
func editDACL(path string, adding bool, edit func(acl []byte) ([]byte, error)) error {
	p16, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	access := uint32(windows.READ_CONTROL | windows.WRITE_DAC)
	if adding {
		access |= windows.FILE_READ_ATTRIBUTES
	}
	h, err := windows.CreateFile(p16, access,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if errors.Is(err, windows.ERROR_FILE_NOT_FOUND) || errors.Is(err, windows.ERROR_PATH_NOT_FOUND) {
		return fmt.Errorf("%s: %w", path, errNotThere)
	}
	if err != nil {
		return fmt.Errorf("open %s for its DACL: %w", path, err)
	}
	defer windows.CloseHandle(h)
	final, err := finalPath(h)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if want := extendedPath(path); !strings.EqualFold(final, want) {
		return fmt.Errorf("%s reaches %s: a reparse point or short name is on the way, and the entry would land on another object than the one named", path, final)
	}
	if adding {
		var info windows.ByHandleFileInformation
		if err := windows.GetFileInformationByHandle(h, &info); err != nil {
			return fmt.Errorf("GetFileInformationByHandle(%s): %w", path, err)
		}
		if info.FileAttributes&windows.FILE_ATTRIBUTE_DIRECTORY == 0 && info.NumberOfLinks != 1 {
			return fmt.Errorf("%s is a file of %d names (hard links): the entry would hold for every other, wherever it lies", path, info.NumberOfLinks)
		}
	}
	sd, err := windows.GetSecurityInfo(h, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return fmt.Errorf("GetSecurityInfo(%s, DACL): %w", path, err)
	}
	control, _, err := sd.Control()
	if err != nil {
		return fmt.Errorf("%s: security descriptor control: %w", path, err)
	}
	dacl, _, err := sd.DACL()
	if err != nil || dacl == nil {
		// No DACL grants everyone everything; one entry added to it would
		// take everything from everyone else instead.
		return fmt.Errorf("%s has no DACL (everyone has full access): not stamping entries on it", path)
	}
	header := unsafe.Slice((*byte)(unsafe.Pointer(dacl)), aclHeaderSize)
	size := binary.LittleEndian.Uint16(header[2:])
	updated, err := edit(unsafe.Slice((*byte)(unsafe.Pointer(dacl)), size))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if updated == nil {
		return nil
	}
	// An ACL is read as DWORDs; a []uint32 gives the alignment.
	words := make([]uint32, (len(updated)+3)/4)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*4), updated)
	acl := (*windows.ACL)(unsafe.Pointer(&words[0]))
	if ok, _, _ := procIsValidAcl.Call(uintptr(unsafe.Pointer(acl))); ok == 0 {
		return fmt.Errorf("%s: the edited DACL is not valid", path)
	}
	// The protection stays what it was: an inheriting DACL keeps
	// inheriting, a protected one stays protected.
	info := windows.SECURITY_INFORMATION(windows.DACL_SECURITY_INFORMATION | windows.UNPROTECTED_DACL_SECURITY_INFORMATION)
	if control&windows.SE_DACL_PROTECTED != 0 {
		info = windows.DACL_SECURITY_INFORMATION | windows.PROTECTED_DACL_SECURITY_INFORMATION
	}
	if err := windows.SetSecurityInfo(h, windows.SE_FILE_OBJECT, info, nil, nil, acl, nil); err != nil {
		return fmt.Errorf("SetSecurityInfo(%s, DACL): %w", path, err)
	}
	return nil
}

// fileKind says whether path is a directory and how many names it has
// (PlanHost.Kind).
func fileKind(path string) (dir bool, links uint32, err error) {
	p16, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return false, 0, fmt.Errorf("%s: %w", path, err)
	}
	h, err := windows.CreateFile(p16, windows.FILE_READ_ATTRIBUTES,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return false, 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer windows.CloseHandle(h)
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		return false, 0, fmt.Errorf("GetFileInformationByHandle(%s): %w", path, err)
	}
	return info.FileAttributes&windows.FILE_ATTRIBUTE_DIRECTORY != 0, info.NumberOfLinks, nil
}

// finalPath is the path Windows resolved h to, in \\?\ form.
func finalPath(h windows.Handle) (string, error) {
	buf := make([]uint16, windows.MAX_PATH)
	for {
		n, err := windows.GetFinalPathNameByHandle(h, &buf[0], uint32(len(buf)), 0)
		if err != nil {
			return "", fmt.Errorf("GetFinalPathNameByHandle: %w", err)
		}
		if int(n) < len(buf) {
			return windows.UTF16ToString(buf[:n]), nil
		}
		buf = make([]uint16, n)
	}
}

// resolvedPath is the path Windows resolves p to, every junction and
// symbolic link on the way followed, in drive or UNC form.
func resolvedPath(p string) (string, error) {
	p16, err := windows.UTF16PtrFromString(p)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	h, err := windows.CreateFile(p16, 0, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", p, err)
	}
	defer windows.CloseHandle(h)
	f, err := finalPath(h)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	if rest, ok := strings.CutPrefix(f, `\\?\UNC\`); ok {
		return `\\` + rest, nil
	}
	return strings.TrimPrefix(f, `\\?\`), nil
}

// extendedPath is how GetFinalPathNameByHandle spells the clean path p.
func extendedPath(p string) string {
	if rest, ok := strings.CutPrefix(p, `\\`); ok {
		return `\\?\UNC\` + rest
	}
	return `\\?\` + p
}

// uninherited returns the objects at or below root whose own DACL Windows
// reads before what they inherit (PlanHost.Uninherited): those protected
// from inheritance, and those with explicit allow entries. A reparse point
// is not followed: what it leads to is not below root, and the entries
// stamped on root are checked where the access lands.
func uninherited(root string) ([]Object, error) {
	var out []Object
	users := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		o, err := objectDACL(p, users)
		if err != nil {
			return err
		}
		if o.Protected || len(o.Allows) > 0 {
			out = append(out, o)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// objectDACL reads what Object says of p; users caches which SIDs are
// user accounts'.
func objectDACL(p string, users map[string]bool) (Object, error) {
	o := Object{Path: p}
	sd, err := windows.GetNamedSecurityInfo(p, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION|windows.OWNER_SECURITY_INFORMATION)
	if err != nil {
		return o, fmt.Errorf("read the DACL of %s: %w", p, err)
	}
	control, _, err := sd.Control()
	if err != nil {
		return o, fmt.Errorf("read the DACL control of %s: %w", p, err)
	}
	o.Protected = control&windows.SE_DACL_PROTECTED != 0
	owner, _, err := sd.Owner()
	if err != nil {
		return o, fmt.Errorf("read the owner of %s: %w", p, err)
	}
	if owner != nil {
		// No owner is an unknown one, which the planner takes for the
		// sandbox's.
		o.Owner = trustee(owner.String(), users)
	}
	dacl, _, err := sd.DACL()
	if err != nil || dacl == nil {
		// No DACL grants everyone everything, and inherits nothing.
		o.Protected = true
		o.Allows = []Grant{{Trustee: Trustee{SID: "S-1-1-0"}, Mask: GENERIC_ALL}}
		return o, nil
	}
	header := unsafe.Slice((*byte)(unsafe.Pointer(dacl)), aclHeaderSize)
	size := binary.LittleEndian.Uint16(header[2:])
	allows, err := aclAllows(unsafe.Slice((*byte)(unsafe.Pointer(dacl)), size), o.Protected)
	if err != nil {
		return o, fmt.Errorf("the DACL of %s: %w", p, err)
	}
	for _, g := range allows {
		g.Trustee = trustee(g.SID, users)
		o.Allows = append(o.Allows, g)
	}
	return o, nil
}

// trustee is sid, said to be a user account's when LookupAccountSid says
// so; a SID it cannot look up is taken for a group.
func trustee(sid string, users map[string]bool) Trustee {
	if sid == "" {
		return Trustee{}
	}
	user, ok := users[sid]
	if !ok {
		if s, err := windows.StringToSid(sid); err == nil {
			_, _, use, err := s.LookupAccount("")
			user = err == nil && use == windows.SidTypeUser
		}
		users[sid] = user
	}
	return Trustee{SID: sid, User: user}
}
