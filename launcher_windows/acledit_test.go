package launcherwindows

import (
	"bytes"
	"encoding/hex"
	"slices"
	"testing"
)

func TestSIDBinary(t *testing.T) {
	for _, tc := range []struct{ sid, want string }{
		{"S-1-5-18", "010100000000000512000000"},
		{"S-1-5-32-544", "01020000000000052000000020020000"},
		{"S-1-16-8192", "010100000000001000200000"},
		{"S-1-5-21-1-2-3-1001", "010500000000000515000000010000000200000003000000e9030000"},
	} {
		b, err := sidBinary(tc.sid)
		if err != nil {
			t.Errorf("sidBinary(%s): %v", tc.sid, err)
			continue
		}
		if got := hex.EncodeToString(b); got != tc.want {
			t.Errorf("sidBinary(%s) = %s, want %s", tc.sid, got, tc.want)
		}
	}
	if b, err := sidBinary(DeriveSID("x")); err != nil || len(b) != 8+4*10 {
		t.Errorf("sidBinary of a derived SID: %d bytes, %v; want %d", len(b), err, 8+4*10)
	}
	for _, bad := range []string{"", "S-1", "S-1-5", "S-2-5-18", "S-1-5-x", "S-1-5-4294967296", "S-1-281474976710656-1",
		"S-1-5-1-2-3-4-5-6-7-8-9-10-11-12-13-14-15-16"} {
		if _, err := sidBinary(bad); err == nil {
			t.Errorf("sidBinary(%q) succeeded", bad)
		}
	}
}

func aclTestSID(t *testing.T, s string) []byte {
	t.Helper()
	b, err := sidBinary(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// aclDescribe renders an ACL as one line per entry, for comparisons.
func aclDescribe(t *testing.T, acl []byte) []string {
	t.Helper()
	_, aces, err := aclEntries(acl)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range aces {
		out = append(out, hex.EncodeToString(a[:2])+":"+hex.EncodeToString(a[4:8])+":"+hex.EncodeToString(a[8:]))
	}
	return out
}

func aclInheritedCopy(ace []byte) []byte {
	c := bytes.Clone(ace)
	c[1] |= aceInherited
	return c
}

// TestACLWithKeepsCanonicalOrder: a deny added after an allow that grants
// the same right would never be reached by the access check.
func TestACLWithKeepsCanonicalOrder(t *testing.T) {
	users := aclTestSID(t, "S-1-5-32-545")
	system := aclTestSID(t, "S-1-5-18")
	logon := aclTestSID(t, "S-1-5-5-0-4242")
	root := aclTestSID(t, WriteRootSID(`C:\work`))

	explicitAllow := aceBinary(true, true, FILE_GENERIC_READ, users)
	inheritedDeny := aclInheritedCopy(aceBinary(false, true, DELETE, users))
	inheritedAllow := aclInheritedCopy(aceBinary(true, true, FILE_ALL_ACCESS, system))
	acl, err := aclBuild(aclRevision, [][]byte{explicitAllow, inheritedDeny, inheritedAllow})
	if err != nil {
		t.Fatal(err)
	}

	deny := aceBinary(false, true, FILE_ALL_ACCESS, logon)
	withDeny, present, err := aclWith(acl, deny)
	if err != nil || present {
		t.Fatalf("aclWith(deny) = present %v, %v", present, err)
	}
	allow := aceBinary(true, true, ModifyAccess, root)
	withBoth, present, err := aclWith(withDeny, allow)
	if err != nil || present {
		t.Fatalf("aclWith(allow) = present %v, %v", present, err)
	}
	want, err := aclBuild(aclRevision, [][]byte{deny, explicitAllow, allow, inheritedDeny, inheritedAllow})
	if err != nil {
		t.Fatal(err)
	}
	if got, w := aclDescribe(t, withBoth), aclDescribe(t, want); !slices.Equal(got, w) {
		t.Errorf("ACL after adding a deny and an allow:\n got %v\nwant %v", got, w)
	}

	if out, present, err := aclWith(withBoth, allow); err != nil || !present || out != nil {
		t.Errorf("adding the same allow again: present %v, out %x, %v; want present and no new ACL", present, out, err)
	}
	// The same trustee and rights inherited from above is not the entry
	// the backend stamped: it goes away when the parent's does.
	if _, present, _ := aclWith(withBoth, aceBinary(false, true, DELETE, users)); present {
		t.Error("an inherited entry counted as the explicit one")
	}
}

func TestACLWithoutRemovesExactlyTheStampedEntry(t *testing.T) {
	logon := aclTestSID(t, "S-1-5-5-0-4242")
	other := aclTestSID(t, "S-1-5-5-0-4243")
	mine := aceBinary(false, true, FILE_ALL_ACCESS, logon)
	theirs := aceBinary(false, true, FILE_ALL_ACCESS, other)
	sameSIDOtherMask := aceBinary(false, true, DELETE, logon)
	thisObjectOnly := aceBinary(false, false, FILE_ALL_ACCESS, logon)
	acl, err := aclBuild(aclRevision, [][]byte{theirs, sameSIDOtherMask, thisObjectOnly, mine, aclInheritedCopy(mine)})
	if err != nil {
		t.Fatal(err)
	}
	out, found, err := aclWithout(acl, mine)
	if err != nil || !found {
		t.Fatalf("aclWithout = found %v, %v", found, err)
	}
	want, _ := aclBuild(aclRevision, [][]byte{theirs, sameSIDOtherMask, thisObjectOnly, aclInheritedCopy(mine)})
	if got, w := aclDescribe(t, out), aclDescribe(t, want); !slices.Equal(got, w) {
		t.Errorf("ACL after removing:\n got %v\nwant %v", got, w)
	}
	if out, found, err := aclWithout(out, mine); err != nil || found || out != nil {
		t.Errorf("removing it again: found %v, out %x, %v; want not found", found, out, err)
	}
}

func TestACLEntriesRejectsMalformedACLs(t *testing.T) {
	good, _ := aclBuild(aclRevision, [][]byte{aceBinary(true, false, 1, aclTestSID(t, "S-1-5-18"))})
	for name, acl := range map[string][]byte{
		"short header":      good[:4],
		"size past the end": append(bytes.Clone(good[:2]), 0xff, 0x00, 0x01, 0x00, 0x00, 0x00),
		"ACE past the end":  func() []byte { b := bytes.Clone(good); b[10] = 0xff; return b }(),
		"count past the end": func() []byte {
			b := bytes.Clone(good)
			b[4] = 2
			return b
		}(),
	} {
		if _, _, err := aclEntries(acl); err == nil {
			t.Errorf("%s: aclEntries succeeded", name)
		}
	}
}

func TestACLBuildRefusesOversizedACLs(t *testing.T) {
	ace := aceBinary(true, false, 1, aclTestSID(t, DeriveSID("x")))
	var aces [][]byte
	for range aclMaxSize/len(ace) + 1 {
		aces = append(aces, ace)
	}
	if _, err := aclBuild(aclRevision, aces); err == nil {
		t.Error("aclBuild of more than 64 KiB succeeded")
	}
}

// aclAllows is what the planner judges an object below a carve-out by:
// the allow entries read before the inherited ones, each with its SID.
func TestACLAllows(t *testing.T) {
	user := aclTestSID(t, "S-1-5-21-1-2-3-1001")
	everyone := aclTestSID(t, "S-1-1-0")
	explicitAllow := aceBinary(true, true, FILE_ALL_ACCESS, user)
	explicitDeny := aceBinary(false, true, FILE_ALL_ACCESS, everyone)
	inheritedAllow := aclInheritedCopy(aceBinary(true, true, FILE_GENERIC_READ, everyone))
	callback := aceBinary(true, false, FILE_READ_DATA, everyone)
	callback[0] = aceTypeAllowedCallback
	object := aceBinary(true, false, FILE_WRITE_DATA, everyone)
	object[0] = 5 // ACCESS_ALLOWED_OBJECT_ACE: its SID follows GUIDs
	acl, err := aclBuild(aclRevision, [][]byte{explicitDeny, explicitAllow, callback, object, inheritedAllow})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		protected bool
		want      []Grant
	}{
		{false, []Grant{
			{Trustee{SID: "S-1-5-21-1-2-3-1001"}, FILE_ALL_ACCESS},
			{Trustee{SID: "S-1-1-0"}, FILE_READ_DATA},
			{Trustee{}, FILE_WRITE_DATA},
		}},
		{true, []Grant{
			{Trustee{SID: "S-1-5-21-1-2-3-1001"}, FILE_ALL_ACCESS},
			{Trustee{SID: "S-1-1-0"}, FILE_READ_DATA},
			{Trustee{}, FILE_WRITE_DATA},
			{Trustee{SID: "S-1-1-0"}, FILE_GENERIC_READ},
		}},
	} {
		got, err := aclAllows(acl, c.protected)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("protected %v: %v, %v; want %v", c.protected, got, err, c.want)
		}
	}
	for _, s := range []string{"S-1-5-18", "S-1-5-32-544", DeriveSID("x"), "S-1-281474976710655-4294967295"} {
		b, err := sidBinary(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := sidString(b); got != s || err != nil {
			t.Errorf("sidString(sidBinary(%s)) = %s, %v", s, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {1, 2, 0, 0, 0, 0, 0, 5, 1, 0, 0, 0}, {2, 0, 0, 0, 0, 0, 0, 5}} {
		if _, err := sidString(bad); err == nil {
			t.Errorf("sidString(%x) succeeded", bad)
		}
	}
}
