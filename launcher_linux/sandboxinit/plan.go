package sandboxinit

import (
	"encoding/binary"
	"encoding/json"
)

// The plan types are what the daemon's planner decides and the init
// applies without looking at the policy. They travel to the init in the
// binary encoding of encode.go; their JSON is the planner's golden files.

// MountKind is one step of building the sandbox's root.
type MountKind string

const (
	// MountRootReadOnly clones the host root recursively, read-only, nosuid,
	// nodev, as the sandbox root.
	MountRootReadOnly MountKind = "root-ro"
	// MountBind clones host Source (recursively) onto Target, nosuid and
	// nodev.
	MountBind MountKind = "bind"
	// MountDevice clones the host device node Source onto Target.
	MountDevice MountKind = "device"
	// MountRebindReadOnly clones the sandbox's own Target onto itself read-only.
	MountRebindReadOnly MountKind = "rebind-ro"
	// MountPin clones the sandbox's own Target onto itself so that it becomes a
	// mount point, which the kernel refuses to rename or remove (EBUSY).
	MountPin MountKind = "pin"
	// MountTmpfs puts an empty directory of the sandbox's own with Mode
	// on Target, as a fresh tmpfs would be: the init binds a new directory
	// of its own tmpfs there (nosuid, nodev), or for ReadOnly, a mask, one
	// empty directory of that mode read-only, not a filesystem apiece.
	MountTmpfs MountKind = "tmpfs"
	// MountProc mounts a procfs of the sandbox's pid namespace.
	MountProc MountKind = "proc"
	// MountDevpts mounts a private devpts instance.
	MountDevpts MountKind = "devpts"
	// MountMaskFile covers a non-directory with an empty, unreadable,
	// read-only file.
	MountMaskFile MountKind = "mask-file"
	// MountSymlink creates a symlink Target -> Source in a tmpfs of ours.
	MountSymlink MountKind = "symlink"
	// MountFile covers the non-directory Target with a read-only file
	// holding Content, made in the init's own tmpfs; or, Shared, with the
	// file the daemon sends.
	MountFile MountKind = "file"
	// MountPlaceholder creates host directory Source (and missing parents) so
	// that a carve-out or deny path that does not exist yet can be protected.
	MountPlaceholder MountKind = "placeholder"
)

// MountStep is one mount operation of the plan. Paths are absolute; Source is
// a host path, Target a path inside the sandbox.
type MountStep struct {
	Kind     MountKind `json:"kind"`
	Source   string    `json:"source,omitempty"`
	Target   string    `json:"target,omitempty"`
	ReadOnly bool      `json:"read_only,omitempty"`
	Mode     uint32    `json:"mode,omitempty"`
	// Content is what a MountFile step's file holds.
	Content string `json:"content,omitempty"`
	// Optional steps are skipped when their target does not exist (kernel
	// files that only some kernels have).
	Optional bool `json:"optional,omitempty"`
	// Field is the policy field this step enforces, named in errors.
	Field string `json:"field"`
	// Idmapped is set on the bind of a write root whose owner the daemon
	// maps to the sandbox uid: only the host's root can make such a
	// mount, so the daemon sends it ready-made (PassMount), one per step
	// in plan order, and the init attaches it in place of a clone of
	// Source.
	Idmapped bool `json:"idmapped,omitempty"`
	// Shared is set on a MountFile step whose file is the daemon's, one
	// for all its sessions with that content: the daemon sends it as a
	// read-only mount of its own (PassMount, in plan order with the
	// ID-mapped ones), which the init attaches with no path looked up, so
	// that nothing done to a name between the daemon's writing and the
	// init's binding can change what the sandbox gets. Content and
	// Source are then empty (a source would let the init take the step
	// for a clone of that path; the encoder and decoder refuse one).
	Shared bool `json:"shared,omitempty"`
	// Via is, for a placeholder inside an ID-mapped write root, that
	// root: the directory is made through the mapped mount, where the
	// init may create what the sandbox may, and is owned on the host as
	// what the sandbox creates there.
	Via string `json:"via,omitempty"`
}

// LandlockRule grants Access beneath Path.
type LandlockRule struct {
	Path   string `json:"path"`
	Access uint64 `json:"access"`
}

// LandlockPlan is the second filesystem layer. ABI 0 means Landlock is absent.
type LandlockPlan struct {
	ABI       int            `json:"abi"`
	HandledFS uint64         `json:"handled_fs"`
	Scoped    uint64         `json:"scoped"`
	Rules     []LandlockRule `json:"rules"`
	// ReadExcept grants ReadAccess on the whole tree except these paths.
	// Landlock cannot take a right away beneath a rule, so the applier
	// grants it on every sibling along the way to each excepted path
	// instead; the directories on the way stay listable (names only).
	ReadAccess uint64   `json:"read_access,omitempty"`
	ReadExcept []string `json:"read_except,omitempty"`
	// Strict makes a directory on the way to an excepted path that cannot
	// be listed an error instead of a whole grant; set when no mount mask
	// backs the exception.
	Strict bool `json:"strict,omitempty"`
}

// ExecPlan is how the init starts the command once the root is built.
type ExecPlan struct {
	Argv     []string     `json:"argv"`
	Env      []string     `json:"env"`
	Cwd      string       `json:"cwd"`
	UID      uint32       `json:"uid"`
	GID      uint32       `json:"gid"`
	Terminal bool         `json:"terminal"`
	Rows     uint16       `json:"rows,omitempty"`
	Cols     uint16       `json:"cols,omitempty"`
	Landlock LandlockPlan `json:"landlock"`
	Seccomp  Program      `json:"seccomp"`
	// TerminalRule grants the command its terminal's replica, a host
	// device when no mount namespace gives the sandbox its own devpts.
	TerminalRule bool `json:"terminal_rule,omitempty"`
	// Listener installs Seccomp with a listener that the init hands to
	// the daemon, which answers the calls the filter notifies.
	Listener bool `json:"listener,omitempty"`
	// WriteRoots are the policy's write roots as the sandbox sees them.
	// The init checks, without its capabilities, that the command will
	// be able to write each one, so that a grant the sandbox uid cannot
	// use is refused instead of handed over silently.
	WriteRoots []string `json:"write_roots,omitempty"`
	// CgroupTasks is how many cgroup v1 tasks files the daemon sends
	// (PassCgroup) for the command's process to join.
	CgroupTasks int `json:"cgroup_tasks,omitempty"`
}

// SockFilter is one classic BPF instruction of the seccomp program.
type SockFilter struct {
	Code uint16 `json:"c"`
	Jt   uint8  `json:"t"`
	Jf   uint8  `json:"f"`
	K    uint32 `json:"k"`
}

// Program is a seccomp filter.
type Program []SockFilter

// MarshalJSON encodes p as base64 of struct sock_filter records, the
// kernel's own layout, eight bytes an instruction: a golden file reads
// better with the program as one string than as thousands of objects.
func (p Program) MarshalJSON() ([]byte, error) {
	raw := make([]byte, 0, 8*len(p))
	for _, f := range p {
		raw = binary.LittleEndian.AppendUint16(raw, f.Code)
		raw = append(raw, f.Jt, f.Jf)
		raw = binary.LittleEndian.AppendUint32(raw, f.K)
	}
	return json.Marshal(raw)
}

// Plan is the part of the daemon's plan that the init applies.
type Plan struct {
	// Namespaces is false for the landlock set: the init stays in the
	// daemon's namespaces, builds no root, and as a child subreaper kills
	// every descendant when the command ends.
	Namespaces bool        `json:"namespaces"`
	Mounts     []MountStep `json:"mounts"`
	NetNS      bool        `json:"netns"`
	Hostname   string      `json:"hostname"`
	// ProxyListen is the address in the sandbox's network namespace
	// where the init listens for the daemon's proxy and hands the
	// listener over (PassProxy); empty when there is no proxy.
	ProxyListen string `json:"proxy_listen,omitempty"`
	// LoopbackForwards are the ports of the host's 127.0.0.1 the policy
	// allows: the init listens on each in the sandbox's network namespace
	// too and hands the listeners over (PassForward), for the daemon to
	// forward what they accept to the host's port.
	LoopbackForwards []uint16 `json:"loopback_forwards,omitempty"`
	Exec             ExecPlan `json:"exec"`
}

// Landlock access rights the init itself grants, from
// include/uapi/linux/landlock.h.
const (
	LLExecute   = 1 << 0
	LLWriteFile = 1 << 1
	LLReadFile  = 1 << 2
	LLTruncate  = 1 << 14 // ABI 3
	LLIoctlDev  = 1 << 15 // ABI 5

	// LLFileRights are the rights a rule on a non-directory may carry.
	LLFileRights = LLExecute | LLWriteFile | LLReadFile | LLTruncate | LLIoctlDev
)
