package launcherlinux

// Landlock access rights, from include/uapi/linux/landlock.h.
const (
	llExecute    = 1 << 0
	llWriteFile  = 1 << 1
	llReadFile   = 1 << 2
	llReadDir    = 1 << 3
	llRemoveDir  = 1 << 4
	llRemoveFile = 1 << 5
	llMakeChar   = 1 << 6
	llMakeDir    = 1 << 7
	llMakeReg    = 1 << 8
	llMakeSock   = 1 << 9
	llMakeFifo   = 1 << 10
	llMakeBlock  = 1 << 11
	llMakeSym    = 1 << 12
	llRefer      = 1 << 13 // ABI 2
	llTruncate   = 1 << 14 // ABI 3
	llIoctlDev   = 1 << 15 // ABI 5

	llScopeAbstractUnix = 1 << 0 // ABI 6
	llScopeSignal       = 1 << 1 // ABI 6
)

// handledFS is every filesystem right the kernel's ABI knows, so nothing
// is left unrestricted by omission.
func handledFS(abi int) uint64 {
	if abi <= 0 {
		return 0
	}
	h := uint64(1<<13 - 1)
	if abi >= 2 {
		h |= llRefer
	}
	if abi >= 3 {
		h |= llTruncate
	}
	if abi >= 5 {
		h |= llIoctlDev
	}
	return h
}

func planLandlock(abi int, writes []string, privateTmp, netns bool, denyRead []string) LandlockPlan {
	if abi <= 0 {
		return LandlockPlan{}
	}
	h := handledFS(abi)
	read := uint64(llReadFile | llReadDir | llExecute)
	var readExcept []string
	rootAccess := read & h
	if len(denyRead) > 0 {
		readExcept = sortedByDepth(denyRead)
		rootAccess = llReadDir
	}
	rules := []LandlockRule{
		{Path: "/", Access: rootAccess},
		{Path: "/dev", Access: (read | llWriteFile | llIoctlDev) & h},
		{Path: "/proc", Access: (read | llWriteFile) & h},
		{Path: "/dev/shm", Access: h},
	}
	if privateTmp {
		rules = append(rules, LandlockRule{Path: "/tmp", Access: h})
	}
	for _, w := range sortedByDepth(writes) {
		rules = append(rules, LandlockRule{Path: w, Access: h})
	}
	var scoped uint64
	if abi >= 6 {
		scoped = llScopeSignal
		if netns {
			scoped |= llScopeAbstractUnix
		}
	}
	p := LandlockPlan{ABI: abi, HandledFS: h, Scoped: scoped, Rules: rules}
	if readExcept != nil {
		p.ReadAccess, p.ReadExcept = read&h, readExcept
	}
	return p
}
