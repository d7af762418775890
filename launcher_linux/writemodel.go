package launcherlinux

import (
	"path"
	"strconv"
	"sync"

	"github.com/sandboxd/sandboxd/internal/share"
)

// WriteModel is the sandbox's filesystem as the plan builds it, reduced to
// what decides whether a call that writes can succeed: which mounts are
// read-only or masks, and which Landlock rules grant which write rights.
// The daemon judges each write-intent call against it to record a
// refusal; the mounts and Landlock, not the model, refuse. It is built
// from the very mount steps and Landlock plan the init applies, so the
// two cannot tell different stories.
type WriteModel struct {
	// Mounts are the sandbox's mounts as they stand once the plan is
	// applied: a mount hides what was mounted at or beneath its target
	// before it, a read-only rebind makes what it covers read-only.
	Mounts []ModelMount `json:"mounts,omitempty"`
	// HandledFS and Rules are the Landlock layer; a right it does not
	// handle is not restricted by it.
	HandledFS uint64         `json:"handled_fs,omitempty"`
	Rules     []LandlockRule `json:"rules,omitempty"`
	// ReadOnly and Deny are the policy's paths: a refusal within one is
	// that field's, whichever layer refuses.
	ReadOnly []string `json:"read_only,omitempty"`
	Deny     []string `json:"deny,omitempty"`
	// Terminal is the session's terminal replica, which the command may
	// change as its owner though it is outside every write root.
	Terminal string `json:"terminal,omitempty"`
}

// ModelMount is one mount of the sandbox's view.
type ModelMount struct {
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
	// Mask is maskedDir for an empty directory nothing may search,
	// maskedFile for an empty file nothing may open.
	Mask string `json:"mask,omitempty"`
	// Field is the policy field the mount serves, blamed for a refusal it
	// causes outside the policy's read_only and deny paths.
	Field string `json:"field"`
}

const (
	maskedDir  = "dir"
	maskedFile = "file"
)

// File types as stat's st_mode carries them, which the model is told and
// which Landlock distinguishes (one right per type of name made).
const (
	modeType = 0o170000
	modeDir  = 0o040000
	modeReg  = 0o100000
	modeLnk  = 0o120000
	modeChr  = 0o020000
	modeBlk  = 0o060000
	modeFifo = 0o010000
	modeSock = 0o140000
)

// open(2) flags the judgement reads.
const (
	oAccMode = 0x3
	oCreat   = 0x40
	oExcl    = 0x80
	oTrunc   = 0x200
	oTmpfile = 0x410000
)

const (
	renameNoReplace = 0x1
	renameExchange  = 0x2
)

// buildWriteModel derives the model from the plan's mount steps (none for
// the landlock set) and its Landlock layer.
func buildWriteModel(steps []MountStep, ll LandlockPlan, readOnly, deny []string) *WriteModel {
	// Each step stacks at most one mount, and most stay: room for them all
	// up front rather than growing the list as the steps go.
	m := &WriteModel{HandledFS: ll.HandledFS, ReadOnly: readOnly, Deny: deny, Mounts: make([]ModelMount, 0, len(steps))}
	for _, r := range ll.Rules {
		// Only rules with a write right can make a write succeed.
		if r.Access&^uint64(llReadFile|llReadDir|llExecute) != 0 {
			m.Rules = append(m.Rules, r)
		}
	}
	for _, s := range steps {
		field := s.Field
		if field == "filesystem.read" {
			// The read-only root refuses writes, which the write field
			// names.
			field = "filesystem.write"
		}
		switch s.Kind {
		case MountRootReadOnly:
			m.mount(ModelMount{Path: s.Target, ReadOnly: true, Field: field})
		case MountBind, MountDevice, MountProc, MountDevpts:
			m.mount(ModelMount{Path: s.Target, Field: field})
		case MountTmpfs:
			mm := ModelMount{Path: s.Target, Field: field}
			if s.ReadOnly {
				mm.ReadOnly, mm.Mask = true, maskedDir
			}
			m.mount(mm)
		case MountMaskFile:
			m.mount(ModelMount{Path: s.Target, ReadOnly: true, Mask: maskedFile, Field: field})
		case MountRebindReadOnly:
			// A recursive clone, made read-only throughout: what was
			// mounted beneath stays, read-only now.
			for i := range m.Mounts {
				if within(m.Mounts[i].Path, s.Target) {
					m.Mounts[i].ReadOnly, m.Mounts[i].Field = true, field
				}
			}
			m.clone(s.Target, true, field)
		case MountPin:
			// A recursive clone as it was: only a mount point more.
			m.clone(s.Target, m.at(s.Target).ReadOnly, field)
		}
	}
	return sharedModel(m)
}

// models holds the write model of each sandbox view that some session
// still judges against, so that sessions started under the same policy
// share one: a model of the workspace-write preset's view is about 2 KiB
// of the daemon's heap, which a thousand idle sessions held a thousand
// times. A model is never changed once built (withTerminal copies).
var models share.Table[WriteModel]

// sharedModel returns the model equal to m that is in use already, or m,
// which it keeps for the next, in a copy of its mounts without the room
// that building them left.
func sharedModel(m *WriteModel) *WriteModel {
	buf := modelKeys.Get().(*[]byte)
	defer modelKeys.Put(buf)
	*buf = m.appendKey((*buf)[:0])
	shared, _ := models.Get(*buf, func() (*WriteModel, string) {
		// Trimmed before it is in the table: another launch may have it
		// from there at once, and what is in the table is never changed.
		m.Mounts = append([]ModelMount(nil), m.Mounts...)
		return m, ""
	})
	return shared
}

// modelKeys hold the keys of models being looked up: one is about 2 KiB
// for the workspace-write preset's view, and only a new model's is kept.
var modelKeys = sync.Pool{New: func() any { return new([]byte) }}

// appendKey appends to b what spells out every field of the model, each
// string with its length, so that two models have the same key only when
// they are equal.
func (m *WriteModel) appendKey(b []byte) []byte {
	str := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	for _, o := range m.Mounts {
		str(o.Path)
		str(o.Mask)
		str(o.Field)
		b = strconv.AppendBool(b, o.ReadOnly)
	}
	b = append(b, '|')
	b = strconv.AppendUint(b, m.HandledFS, 16)
	b = append(b, '|')
	for _, r := range m.Rules {
		str(r.Path)
		b = strconv.AppendUint(b, r.Access, 16)
		b = append(b, ',')
	}
	for _, l := range [][]string{m.ReadOnly, m.Deny} {
		b = append(b, '|')
		b = strconv.AppendInt(b, int64(len(l)), 10)
		b = append(b, '|')
		for _, p := range l {
			str(p)
		}
	}
	str(m.Terminal)
	return b
}

// mount stacks mm: what was mounted at or beneath its path is hidden.
func (m *WriteModel) mount(mm ModelMount) {
	kept := m.Mounts[:0]
	for _, o := range m.Mounts {
		if !within(o.Path, mm.Path) {
			kept = append(kept, o)
		}
	}
	m.Mounts = append(kept, mm)
}

// clone stacks a recursive clone of the mount at p onto p, keeping what
// was mounted beneath.
func (m *WriteModel) clone(p string, readOnly bool, field string) {
	under := m.at(p)
	for i, o := range m.Mounts {
		if o.Path == p {
			m.Mounts = append(m.Mounts[:i], m.Mounts[i+1:]...)
			break
		}
	}
	m.Mounts = append(m.Mounts, ModelMount{Path: p, ReadOnly: readOnly, Mask: under.Mask, Field: field})
}

// at is the mount p lies on: the innermost one that covers it. The
// landlock set has no mounts of its own; the host's are writable as far
// as the policy goes.
func (m *WriteModel) at(p string) ModelMount {
	best := ModelMount{Path: "", Field: "filesystem.write"}
	for _, o := range m.Mounts {
		if within(p, o.Path) && len(o.Path) >= len(best.Path) {
			best = o
		}
	}
	return best
}

// mountPoint is the mount whose root p is, if any: the kernel refuses to
// rename or remove one (EBUSY).
func (m *WriteModel) mountPoint(p string) (ModelMount, bool) {
	for _, o := range m.Mounts {
		if o.Path == p && p != "/" {
			return o, true
		}
	}
	return ModelMount{}, false
}

// granted reports whether Landlock lets every right of need act at p.
func (m *WriteModel) granted(p string, need uint64) bool {
	need &= m.HandledFS
	if need == 0 {
		return true
	}
	var have uint64
	for _, r := range m.Rules {
		if within(p, r.Path) {
			have |= r.Access
		}
	}
	return have&need == need
}

// withTerminal is the model once the init grants the command its
// terminal's replica, a host device the plan cannot name in advance.
func (m *WriteModel) withTerminal(replica string) *WriteModel {
	c := *m
	c.Rules = append(append([]LandlockRule(nil), m.Rules...), LandlockRule{Path: replica, Access: (llReadFile | llWriteFile | llIoctlDev) & m.HandledFS})
	c.Terminal = replica
	return &c
}

// blame names the field a refusal at p comes from: the policy path p lies
// in, else the field of the layer that refuses.
func (m *WriteModel) blame(p, layer string) string {
	switch {
	case coveredBy(p, m.Deny):
		return "filesystem.deny"
	case coveredBy(p, m.ReadOnly):
		return "filesystem.read_only"
	}
	return layer
}

// metaRefusal judges a change of p's metadata (mode, owner, times,
// extended attributes, inode flags): nil when the policy lets the sandbox
// make it. Only a write root may change, not a read-only carve-out or deny
// path within one, and of the devices only the session's terminal: the
// same as the namespaces set's read-only mounts allow, whose EROFS the
// refusal answers. Without mounts (the landlock set), a write root is a
// path granted the right to make files.
func (m *WriteModel) metaRefusal(p string) *writeRefusal {
	if r := m.searchMasked(p); r != nil {
		return r
	}
	if coveredBy(p, m.Deny) {
		return m.refuse(p, "filesystem.deny", "EACCES")
	}
	if p == m.Terminal && p != "" {
		return nil
	}
	if len(m.Mounts) > 0 {
		if mnt := m.at(p); mnt.ReadOnly {
			return m.refuse(p, mnt.Field, "EROFS")
		}
		return nil
	}
	if coveredBy(p, m.ReadOnly) || !m.granted(p, llMakeReg|llRemoveFile) {
		return m.refuse(p, "filesystem.write", "EROFS")
	}
	return nil
}

// writeKind is what a write-intent call does to the names it is given.
type writeKind int

const (
	// writeOpen opens Target (open, openat, openat2, creat) with Flags.
	writeOpen writeKind = iota
	// writeTruncate truncates Target.
	writeTruncate
	// writeMake makes the name Target of type Mode (mkdir, mknod,
	// symlink).
	writeMake
	// writeLink gives Source the new name Target.
	writeLink
	// writeUnlink and writeRmdir remove Target.
	writeUnlink
	writeRmdir
	// writeRename moves Source to Target, with renameat2's Flags.
	writeRename
)

// writeCall is one write-intent call with its names resolved in the
// sandbox's view.
type writeCall struct {
	Op     string
	Kind   writeKind
	Flags  uint64
	Mode   uint32
	Target namedPath
	Source namedPath
}

// namedPath is one name a call acts on, as the sandbox sees it.
type namedPath struct {
	// Path is absolute and free of symlinks up to its last component,
	// which is followed where the call follows it. Where a directory on
	// the way is missing, the rest is taken as written.
	Path   string
	Exists bool
	// Type is the file type of what Path names when it exists.
	Type         uint32
	ParentExists bool
	// Mount and ParentMount are the kernel's ids of the mounts of what
	// Path names and of its directory, 0 when not looked up: calls that
	// join two names fail across mounts (EXDEV) before any check of ours.
	Mount, ParentMount uint64
}

// writeRefusal is the judgement on a call the sandbox will refuse: the
// field, what the refusing layer answers, and the name it refuses.
type writeRefusal struct {
	Field, Errno, Path string
}

// judge says whether the sandbox refuses c, and why; nil when the call is
// let through or fails for a reason of its own (a missing directory, a
// name that exists already, a file of the wrong type). The checks come in
// the order the kernel makes them, so the errno is the one the call gets
// from the policy's layers (file permissions may refuse it first).
func (m *WriteModel) judge(c *writeCall) *writeRefusal {
	if r := m.searchMasked(c.Target.Path); r != nil {
		return r
	}
	if c.Kind == writeLink || c.Kind == writeRename {
		if r := m.searchMasked(c.Source.Path); r != nil {
			return r
		}
	}
	switch c.Kind {
	case writeOpen:
		return m.judgeOpen(c)
	case writeTruncate:
		t := c.Target
		if !t.Exists || t.Type != modeReg {
			return nil
		}
		if mnt := m.at(t.Path); mnt.ReadOnly {
			return m.refuse(t.Path, mnt.Field, "EROFS")
		}
		return m.need(t.Path, t.Path, llTruncate)
	case writeMake:
		if c.Target.Exists || !c.Target.ParentExists {
			return nil
		}
		return m.create(c.Target.Path, c.Mode)
	case writeLink:
		return m.judgeLink(c)
	case writeUnlink, writeRmdir:
		return m.judgeRemove(c)
	case writeRename:
		return m.judgeRename(c)
	}
	return nil
}

// searchMasked refuses a name beneath a masked directory: the walk to it
// fails there, whatever the call.
func (m *WriteModel) searchMasked(p string) *writeRefusal {
	for _, o := range m.Mounts {
		if o.Mask == maskedDir && p != o.Path && within(p, o.Path) {
			return m.refuse(p, o.Field, "EACCES")
		}
	}
	return nil
}

func (m *WriteModel) judgeOpen(c *writeCall) *writeRefusal {
	t, flags := c.Target, c.Flags
	if flags&oTmpfile == oTmpfile {
		// An unnamed file made in the directory Target.
		if !t.Exists || t.Type != modeDir {
			return nil
		}
		return m.createIn(t.Path, t.Path, modeReg)
	}
	if !t.Exists {
		if flags&oCreat == 0 || !t.ParentExists {
			return nil
		}
		return m.create(t.Path, modeReg)
	}
	if flags&(oCreat|oExcl) == oCreat|oExcl {
		return nil
	}
	write := flags&oAccMode != 0
	switch t.Type {
	case modeReg:
		trunc := flags&oTrunc != 0
		if mnt := m.at(t.Path); mnt.ReadOnly {
			// Truncating asks the mount first; otherwise the file's own
			// mode is checked first, and a mask's lets no one in.
			errno := "EROFS"
			if mnt.Mask == maskedFile && !trunc {
				errno = "EACCES"
			}
			return m.refuse(t.Path, mnt.Field, errno)
		}
		var need uint64
		if write {
			need |= llWriteFile
		}
		if trunc {
			need |= llTruncate
		}
		return m.need(t.Path, t.Path, need)
	case modeChr, modeBlk, modeFifo:
		// A read-only mount does not stop a write to a device or a
		// fifo; Landlock does.
		if write {
			return m.need(t.Path, t.Path, llWriteFile)
		}
	}
	// Directories (EISDIR), sockets (ENXIO) and symlinks the call does
	// not follow (ELOOP) fail on their own.
	return nil
}

func (m *WriteModel) judgeLink(c *writeCall) *writeRefusal {
	s, t := c.Source, c.Target
	if !s.Exists || s.Type == modeDir || t.Exists || !t.ParentExists {
		return nil
	}
	dir := path.Dir(t.Path)
	if mnt := m.at(dir); mnt.ReadOnly {
		return m.refuse(t.Path, mnt.Field, "EROFS")
	}
	if s.Mount != 0 && t.ParentMount != 0 && s.Mount != t.ParentMount {
		return nil
	}
	if r := m.need(t.Path, dir, makeRight(s.Type)); r != nil {
		return r
	}
	return m.refer(s.Path, t.Path)
}

func (m *WriteModel) judgeRemove(c *writeCall) *writeRefusal {
	t := c.Target
	if !t.ParentExists {
		return nil
	}
	dir := path.Dir(t.Path)
	if mnt := m.at(dir); mnt.ReadOnly {
		// The mount is asked before the name is looked up.
		return m.refuse(t.Path, mnt.Field, "EROFS")
	}
	if !t.Exists || (t.Type == modeDir) != (c.Kind == writeRmdir) {
		return nil
	}
	if r := m.need(t.Path, dir, removeRight(t.Type)); r != nil {
		return r
	}
	return m.busy(t.Path)
}

func (m *WriteModel) judgeRename(c *writeCall) *writeRefusal {
	s, t := c.Source, c.Target
	if !s.ParentExists || !t.ParentExists {
		return nil
	}
	if s.ParentMount != 0 && t.ParentMount != 0 && s.ParentMount != t.ParentMount {
		return nil
	}
	sdir, tdir := path.Dir(s.Path), path.Dir(t.Path)
	if mnt := m.at(sdir); mnt.ReadOnly {
		return m.refuse(s.Path, mnt.Field, "EROFS")
	}
	if mnt := m.at(tdir); mnt.ReadOnly {
		return m.refuse(t.Path, mnt.Field, "EROFS")
	}
	exchange := c.Flags&renameExchange != 0
	switch {
	case !s.Exists:
		return nil
	case t.Exists && c.Flags&renameNoReplace != 0, !t.Exists && exchange:
		return nil
	case t.Exists && !exchange && (s.Type == modeDir) != (t.Type == modeDir):
		return nil
	}
	if r := m.need(s.Path, sdir, removeRight(s.Type)); r != nil {
		return r
	}
	if r := m.need(t.Path, tdir, makeRight(s.Type)); r != nil {
		return r
	}
	if t.Exists {
		if r := m.need(t.Path, tdir, removeRight(t.Type)); r != nil {
			return r
		}
		if exchange {
			if r := m.need(s.Path, sdir, makeRight(t.Type)); r != nil {
				return r
			}
		}
	}
	if r := m.refer(s.Path, t.Path); r != nil {
		return r
	}
	if r := m.busy(s.Path); r != nil {
		return r
	}
	if t.Exists {
		return m.busy(t.Path)
	}
	return nil
}

// create judges making the name p of type typ.
func (m *WriteModel) create(p string, typ uint32) *writeRefusal {
	return m.createIn(p, path.Dir(p), typ)
}

func (m *WriteModel) createIn(p, dir string, typ uint32) *writeRefusal {
	if mnt := m.at(dir); mnt.ReadOnly {
		return m.refuse(p, mnt.Field, "EROFS")
	}
	return m.need(p, dir, makeRight(typ))
}

// need refuses the call on p unless Landlock grants every right of need
// at where.
func (m *WriteModel) need(p, where string, need uint64) *writeRefusal {
	if m.granted(where, need) {
		return nil
	}
	return m.refuse(p, "filesystem.write", "EACCES")
}

// refer is Landlock's rule for a name moved or linked to another
// directory: both directories need the right to.
func (m *WriteModel) refer(from, to string) *writeRefusal {
	fdir, tdir := path.Dir(from), path.Dir(to)
	if fdir == tdir {
		return nil
	}
	if r := m.need(from, fdir, llRefer); r != nil {
		return r
	}
	return m.need(to, tdir, llRefer)
}

// busy refuses renaming or removing a mount point.
func (m *WriteModel) busy(p string) *writeRefusal {
	if mnt, ok := m.mountPoint(p); ok {
		return m.refuse(p, mnt.Field, "EBUSY")
	}
	return nil
}

func (m *WriteModel) refuse(p, layer, errno string) *writeRefusal {
	return &writeRefusal{Field: m.blame(p, layer), Errno: errno, Path: p}
}

func makeRight(typ uint32) uint64 {
	switch typ & modeType {
	case modeDir:
		return llMakeDir
	case modeChr:
		return llMakeChar
	case modeBlk:
		return llMakeBlock
	case modeFifo:
		return llMakeFifo
	case modeSock:
		return llMakeSock
	case modeLnk:
		return llMakeSym
	}
	return llMakeReg
}

func removeRight(typ uint32) uint64 {
	if typ&modeType == modeDir {
		return llRemoveDir
	}
	return llRemoveFile
}
