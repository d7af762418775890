package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Arch is an architecture the seccomp program is built for.
type Arch struct {
	// GOARCH names it to the Go toolchain and in x/sys's file names.
	GOARCH string
	// Audit is its AUDIT_ARCH_* value (linux/audit.h), which the kernel
	// puts in seccomp_data.arch.
	Audit uint32
	// X32 says the architecture has the x32 ABI, whose syscall numbers
	// have bit 30 set and reach the same entry points under other
	// numbers.
	X32 bool
}

// Arches are the architectures sandboxd has tables for.
var Arches = []Arch{
	{GOARCH: "amd64", Audit: 0xc000003e, X32: true},
	{GOARCH: "arm64", Audit: 0xc00000b7},
}

// Names are the syscalls launcher_linux names: what the filter refuses,
// notifies or inspects, and what its tests call.
var Names = []string{
	"_sysctl", "accept", "access", "acct", "add_key", "adjtimex", "bind", "bpf", "chdir", "chmod", "chown",
	"clock_adjtime", "clock_settime", "clone", "clone3", "connect", "creat", "create_module",
	"delete_module", "faccessat", "faccessat2", "fanotify_init", "fchmod", "fchmodat", "fchmodat2",
	"fchown", "fchownat", "file_getattr", "file_setattr", "finit_module", "fremovexattr", "fsconfig",
	"fsetxattr", "fsmount", "fsopen", "fspick", "futimesat", "getpid", "getxattr", "getxattrat",
	"init_module", "inotify_add_watch", "io_uring_enter", "io_uring_register", "io_uring_setup",
	"ioctl", "ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load", "keyctl", "lchown",
	"lgetxattr", "link", "linkat", "listxattr", "listxattrat", "llistxattr", "lookup_dcookie",
	"lremovexattr", "lsetxattr", "lstat", "mkdir", "mkdirat", "mknod", "mknodat", "mount",
	"mount_setattr", "move_mount", "move_pages", "mq_getsetattr", "mq_notify", "mq_open",
	"mq_timedreceive", "mq_timedsend", "mq_unlink", "msgctl", "msgget", "msgrcv", "msgsnd",
	"name_to_handle_at", "newfstatat", "nfsservctl", "open", "open_by_handle_at", "open_tree",
	"open_tree_attr", "openat", "openat2", "perf_event_open", "pivot_root", "process_vm_readv",
	"process_vm_writev", "ptrace", "quotactl", "quotactl_fd", "read", "readlink", "readlinkat",
	"reboot", "removexattr", "removexattrat", "rename", "renameat", "renameat2", "request_key",
	"rmdir", "semctl", "semget", "semop", "semtimedop", "setns", "settimeofday", "setxattr",
	"setxattrat", "shmat", "shmctl", "shmdt", "shmget", "socket", "socketpair", "stat", "statfs",
	"statx", "swapoff", "swapon", "symlink", "symlinkat", "sysfs", "syslog", "truncate", "umount2",
	"unlink", "unlinkat", "unshare", "uselib", "userfaultfd", "ustat", "utime", "utimensat",
	"utimes", "vhangup", "write",
}

// absent is the first number given to a syscall an architecture lacks:
// each gets its own, so that the supervisor's switches stay valid Go,
// none of them a syscall number of any architecture sandboxd supports,
// and the tables leave them out.
const absent = 0x3fff0000

var sysLine = regexp.MustCompile(`^\s*SYS_([A-Z0-9_]+)\s*=\s*([0-9]+)\s*$`)

// Generate returns the table files, by name, for the x/sys module in dir.
func Generate(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, a := range Arches {
		nums, err := readSysnum(filepath.Join(dir, "unix", "zsysnum_linux_"+a.GOARCH+".go"))
		if err != nil {
			return nil, err
		}
		src, err := render(a, nums)
		if err != nil {
			return nil, err
		}
		files["sysnum_"+a.GOARCH+".go"] = src
	}
	src, err := render(Arch{}, nil)
	if err != nil {
		return nil, err
	}
	files["sysnum_other.go"] = src
	if files["sysnum.go"], err = renderLookup(); err != nil {
		return nil, err
	}
	return files, nil
}

func readSysnum(path string) (map[string]uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("x/sys syscall numbers: %w", err)
	}
	defer f.Close()
	nums := map[string]uint32{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := sysLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n, err := strconv.ParseUint(m[2], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, sc.Text(), err)
		}
		nums[strings.ToLower(m[1])] = uint32(n)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(nums) == 0 {
		return nil, fmt.Errorf("%s: no SYS_ constants", path)
	}
	return nums, nil
}

// constName is the Go name of a syscall's number: nr and the name in
// camel case (io_uring_setup: nrIoUringSetup).
func constName(name string) string {
	var b strings.Builder
	b.WriteString("nr")
	for _, part := range strings.Split(name, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

// render writes one architecture's file; the zero Arch is the file for
// every other architecture, where every syscall is absent and the filter
// refuses to be built.
func render(a Arch, nums map[string]uint32) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by launcher_linux/internal/sysnumgen from golang.org/x/sys/unix; DO NOT EDIT.\n\n")
	if a.GOARCH == "" {
		var tags []string
		for _, o := range Arches {
			tags = append(tags, "!"+o.GOARCH)
		}
		fmt.Fprintf(&b, "//go:build %s\n\n", strings.Join(tags, " && "))
	} else {
		fmt.Fprintf(&b, "//go:build %s\n\n", a.GOARCH)
	}
	b.WriteString("package launcherlinux\n\n")
	arch := a.GOARCH
	if arch == "" {
		arch = "none"
	}
	fmt.Fprintf(&b, "const (\n\tseccompArch = %q\n\tauditArch = %#x\n\thasX32 = %v\n\tabsentNr = %#x\n)\n\n", arch, a.Audit, a.X32, absent)
	names := slices.Clone(Names)
	slices.Sort(names)
	b.WriteString("const (\n")
	missing := 0
	for _, n := range names {
		nr, ok := nums[n]
		if !ok {
			nr = absent + uint32(missing)
			missing++
			fmt.Fprintf(&b, "\t%s = %#x // absent\n", constName(n), nr)
			continue
		}
		fmt.Fprintf(&b, "\t%s = %d\n", constName(n), nr)
	}
	b.WriteString(")\n\n")
	return format.Source(b.Bytes())
}

// renderLookup writes the lookup by name, which every architecture's file
// shares: only the constants it returns differ between them.
func renderLookup() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by launcher_linux/internal/sysnumgen from golang.org/x/sys/unix; DO NOT EDIT.\n\n")
	b.WriteString("package launcherlinux\n\n")
	names := slices.Clone(Names)
	slices.Sort(names)
	// A switch, not a map: a package-level map is built at the start of
	// every program that links the package, sandboxctl among them, which
	// never looks a syscall up.
	b.WriteString("// sysnum is the number of the named syscall; absentNr and above for one\n// this architecture lacks.\nfunc sysnum(name string) (uint32, bool) {\n\tswitch name {\n")
	for _, n := range names {
		fmt.Fprintf(&b, "\tcase %q:\n\t\treturn %s, true\n", n, constName(n))
	}
	b.WriteString("\t}\n\treturn 0, false\n}\n")
	return format.Source(b.Bytes())
}
