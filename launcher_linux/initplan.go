package launcherlinux

import "github.com/sandboxd/sandboxd/launcher_linux/sandboxinit"

// The planner speaks the init's types; see package sandboxinit for why the
// init lives apart.
type (
	MountKind    = sandboxinit.MountKind
	MountStep    = sandboxinit.MountStep
	LandlockRule = sandboxinit.LandlockRule
	LandlockPlan = sandboxinit.LandlockPlan
	ExecPlan     = sandboxinit.ExecPlan
	SockFilter   = sandboxinit.SockFilter
)

const (
	MountRootReadOnly   = sandboxinit.MountRootReadOnly
	MountBind           = sandboxinit.MountBind
	MountDevice         = sandboxinit.MountDevice
	MountRebindReadOnly = sandboxinit.MountRebindReadOnly
	MountPin            = sandboxinit.MountPin
	MountTmpfs          = sandboxinit.MountTmpfs
	MountProc           = sandboxinit.MountProc
	MountDevpts         = sandboxinit.MountDevpts
	MountMaskFile       = sandboxinit.MountMaskFile
	MountSymlink        = sandboxinit.MountSymlink
	MountPlaceholder    = sandboxinit.MountPlaceholder
	MountFile           = sandboxinit.MountFile
)
