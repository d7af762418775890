package launcherwindows

// File access rights, as the Windows SDK defines them.
const (
	FILE_READ_DATA        uint32 = 0x1
	FILE_WRITE_DATA       uint32 = 0x2
	FILE_APPEND_DATA      uint32 = 0x4
	FILE_READ_EA          uint32 = 0x8
	FILE_WRITE_EA         uint32 = 0x10
	FILE_EXECUTE          uint32 = 0x20
	FILE_DELETE_CHILD     uint32 = 0x40
	FILE_READ_ATTRIBUTES  uint32 = 0x80
	FILE_WRITE_ATTRIBUTES uint32 = 0x100
	DELETE                uint32 = 0x10000
	READ_CONTROL          uint32 = 0x20000
	WRITE_DAC             uint32 = 0x40000
	WRITE_OWNER           uint32 = 0x80000
	SYNCHRONIZE           uint32 = 0x100000
	FILE_ALL_ACCESS       uint32 = 0x1F01FF
	FILE_GENERIC_READ     uint32 = 0x120089
	FILE_GENERIC_WRITE    uint32 = 0x120116
	FILE_GENERIC_EXECUTE  uint32 = 0x1200A0
	GENERIC_ALL           uint32 = 0x10000000
	GENERIC_EXECUTE       uint32 = 0x20000000
	GENERIC_WRITE         uint32 = 0x40000000
	GENERIC_READ          uint32 = 0x80000000
)

// ModifyAccess is what a write root grants: read, write, execute and
// delete, but not FILE_DELETE_CHILD, which would let the sandbox delete or
// rename a carve-out through its parent whatever the carve-out's own ACL
// says.
const ModifyAccess = FILE_GENERIC_READ | FILE_GENERIC_WRITE | FILE_GENERIC_EXECUTE | DELETE

// WriteAccess is every right that changes a file or directory, its
// attributes, its place or its ACL: what a carve-out denies.
const WriteAccess = FILE_WRITE_DATA | FILE_APPEND_DATA | FILE_WRITE_EA | FILE_WRITE_ATTRIBUTES | DELETE | FILE_DELETE_CHILD | WRITE_DAC | WRITE_OWNER

// Job object UI restrictions, as the Windows SDK defines them.
const (
	JOB_OBJECT_UILIMIT_HANDLES          uint32 = 0x1
	JOB_OBJECT_UILIMIT_READCLIPBOARD    uint32 = 0x2
	JOB_OBJECT_UILIMIT_WRITECLIPBOARD   uint32 = 0x4
	JOB_OBJECT_UILIMIT_SYSTEMPARAMETERS uint32 = 0x8
	JOB_OBJECT_UILIMIT_DISPLAYSETTINGS  uint32 = 0x10
	JOB_OBJECT_UILIMIT_GLOBALATOMS      uint32 = 0x20
	JOB_OBJECT_UILIMIT_DESKTOP          uint32 = 0x40
	JOB_OBJECT_UILIMIT_EXITWINDOWS      uint32 = 0x80
)

// UIRestrictionsAll is every JOB_OBJECT_UILIMIT_* flag: the sandbox may not
// touch the clipboard, global atoms, system settings, other desktops or
// the USER handles of processes outside its job.
const UIRestrictionsAll = JOB_OBJECT_UILIMIT_HANDLES | JOB_OBJECT_UILIMIT_READCLIPBOARD | JOB_OBJECT_UILIMIT_WRITECLIPBOARD |
	JOB_OBJECT_UILIMIT_SYSTEMPARAMETERS | JOB_OBJECT_UILIMIT_DISPLAYSETTINGS | JOB_OBJECT_UILIMIT_GLOBALATOMS |
	JOB_OBJECT_UILIMIT_DESKTOP | JOB_OBJECT_UILIMIT_EXITWINDOWS
