package launcherwindows

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The binary ACL format (MS-DTYP 2.4.4, 2.4.5), edited here rather than
// with SetEntriesInAcl, which merges a grant into an existing entry of the
// same trustee: an entry merged away could not be found and removed again.
const (
	aclHeaderSize   = 8
	aceHeaderSize   = 4
	aclRevision     = 2
	aclMaxSize      = 0xffff
	aceTypeAllowed  = 0
	aceTypeDenied   = 1
	aceInheritFlags = 0x1 | 0x2 // OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE
	aceInherited    = 0x10      // INHERITED_ACE
)

// The other kinds of entry a DACL may hold that aclAllows tells apart.
const (
	aceTypeAllowedCallback      = 9
	aceTypeDeniedObject         = 6
	aceTypeDeniedCallback       = 0xA
	aceTypeDeniedCallbackObject = 0xC
)

// sidBinary is the binary form of the SID string s.
func sidBinary(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, "S-1-")
	if !ok {
		return nil, fmt.Errorf("SID %q does not start with S-1-", s)
	}
	parts := strings.Split(rest, "-")
	if len(parts) < 2 || len(parts) > 16 {
		return nil, fmt.Errorf("SID %q: %d sub-authorities, want 1 to 15", s, len(parts)-1)
	}
	auth, err := strconv.ParseUint(parts[0], 10, 48)
	if err != nil {
		return nil, fmt.Errorf("SID %q: authority: %w", s, err)
	}
	b := make([]byte, 8, 8+4*(len(parts)-1))
	b[0], b[1] = 1, byte(len(parts)-1)
	for i := range 6 {
		b[7-i] = byte(auth >> (8 * i))
	}
	for _, p := range parts[1:] {
		v, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("SID %q: sub-authority %q: %w", s, p, err)
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b, nil
}

// aceBinary is an ACCESS_ALLOWED_ACE or ACCESS_DENIED_ACE for sid, which
// applies to everything below the object when inherit is set.
func aceBinary(allow, inherit bool, mask uint32, sid []byte) []byte {
	b := make([]byte, aceHeaderSize+4, aceHeaderSize+4+len(sid))
	if !allow {
		b[0] = aceTypeDenied
	}
	if inherit {
		b[1] = aceInheritFlags
	}
	binary.LittleEndian.PutUint16(b[2:], uint16(aceHeaderSize+4+len(sid)))
	binary.LittleEndian.PutUint32(b[4:], mask)
	return append(b, sid...)
}

// aclEntries splits the binary ACL acl into its entries.
func aclEntries(acl []byte) (revision byte, aces [][]byte, err error) {
	if len(acl) < aclHeaderSize {
		return 0, nil, errors.New("ACL shorter than its header")
	}
	size := int(binary.LittleEndian.Uint16(acl[2:]))
	count := int(binary.LittleEndian.Uint16(acl[4:]))
	if size < aclHeaderSize || size > len(acl) {
		return 0, nil, fmt.Errorf("ACL size %d out of range", size)
	}
	off := aclHeaderSize
	for i := range count {
		if off+aceHeaderSize > size {
			return 0, nil, fmt.Errorf("ACE %d runs past the ACL", i)
		}
		n := int(binary.LittleEndian.Uint16(acl[off+2:]))
		if n < aceHeaderSize || off+n > size {
			return 0, nil, fmt.Errorf("ACE %d size %d out of range", i, n)
		}
		aces = append(aces, acl[off:off+n])
		off += n
	}
	return acl[0], aces, nil
}

// aclBuild is a binary ACL of aces.
func aclBuild(revision byte, aces [][]byte) ([]byte, error) {
	size := aclHeaderSize
	for _, a := range aces {
		size += len(a)
	}
	if size > aclMaxSize {
		return nil, fmt.Errorf("ACL of %d entries would be %d bytes, more than an ACL holds", len(aces), size)
	}
	b := make([]byte, aclHeaderSize, size)
	b[0] = max(revision, aclRevision)
	binary.LittleEndian.PutUint16(b[2:], uint16(size))
	binary.LittleEndian.PutUint16(b[4:], uint16(len(aces)))
	for _, a := range aces {
		b = append(b, a...)
	}
	return b, nil
}

// sameEntry reports whether the entry a is the explicit entry want: the
// same type, flags, mask and trustee. Padding after the SID does not count.
func sameEntry(a, want []byte) bool {
	if len(a) < len(want) || a[0] != want[0] || a[1] != want[1] {
		return false
	}
	return bytes.Equal(a[4:len(want)], want[4:])
}

// aclWith returns acl with the entry ace added where the canonical order
// puts it: a deny before every other entry, an allow before the first
// entry inherited from above, which in a canonical ACL is after every
// explicit one. present reports an identical explicit entry already there,
// and out is then nil.
func aclWith(acl, ace []byte) (out []byte, present bool, err error) {
	rev, aces, err := aclEntries(acl)
	if err != nil {
		return nil, false, err
	}
	for _, a := range aces {
		if sameEntry(a, ace) {
			return nil, true, nil
		}
	}
	at := 0
	if ace[0] == aceTypeAllowed {
		at = len(aces)
		for i, a := range aces {
			if a[1]&aceInherited != 0 {
				at = i
				break
			}
		}
	}
	grown := make([][]byte, 0, len(aces)+1)
	grown = append(grown, aces[:at]...)
	grown = append(grown, ace)
	grown = append(grown, aces[at:]...)
	out, err = aclBuild(rev, grown)
	return out, false, err
}

// aclWithout returns acl without its first explicit entry identical to
// ace; found reports whether there was one, and out is nil when not.
func aclWithout(acl, ace []byte) (out []byte, found bool, err error) {
	rev, aces, err := aclEntries(acl)
	if err != nil {
		return nil, false, err
	}
	for i, a := range aces {
		if sameEntry(a, ace) {
			kept := append(append([][]byte{}, aces[:i]...), aces[i+1:]...)
			out, err = aclBuild(rev, kept)
			return out, true, err
		}
	}
	return nil, false, nil
}

// sidString is the string form of the binary SID b.
func sidString(b []byte) (string, error) {
	if len(b) < 8 || b[0] != 1 || len(b) < 8+4*int(b[1]) {
		return "", fmt.Errorf("SID of %d bytes is not well formed", len(b))
	}
	var auth uint64
	for _, c := range b[2:8] {
		auth = auth<<8 | uint64(c)
	}
	var sb strings.Builder
	sb.WriteString("S-1-")
	sb.WriteString(strconv.FormatUint(auth, 10))
	for i := range int(b[1]) {
		sb.WriteByte('-')
		sb.WriteString(strconv.FormatUint(uint64(binary.LittleEndian.Uint32(b[8+4*i:])), 10))
	}
	return sb.String(), nil
}

// aclAllows are the allow entries of the binary DACL acl that Windows
// reads before any inherited from above: all of them when the DACL is
// protected, otherwise those not marked inherited. An entry of a kind
// whose trustee is not read here (an object entry, say) is a grant to an
// unknown trustee, which the planner takes for the sandbox's own.
func aclAllows(acl []byte, protected bool) ([]Grant, error) {
	_, aces, err := aclEntries(acl)
	if err != nil {
		return nil, err
	}
	var out []Grant
	for i, a := range aces {
		switch a[0] {
		case aceTypeDenied, aceTypeDeniedObject, aceTypeDeniedCallback, aceTypeDeniedCallbackObject:
			continue
		}
		if !protected && a[1]&aceInherited != 0 {
			continue
		}
		if len(a) < aceHeaderSize+4 {
			return nil, fmt.Errorf("ACE %d of %d bytes has no access mask", i, len(a))
		}
		g := Grant{Mask: binary.LittleEndian.Uint32(a[4:])}
		if a[0] == aceTypeAllowed || a[0] == aceTypeAllowedCallback {
			if g.SID, err = sidString(a[8:]); err != nil {
				return nil, fmt.Errorf("ACE %d: %w", i, err)
			}
		}
		out = append(out, g)
	}
	return out, nil
}
