package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/sandboxd/sandboxd/internal/socketpath"
	"github.com/sandboxd/sandboxd/internal/statedir"
	"github.com/sandboxd/sandboxd/oci"
)

const exportUsage = `usage: sandboxctl export-oci [run flags] [--rootfs DIR] -- CMD [ARG...] > config.json

Writes the OCI runtime-spec config that runs CMD under the policy the run
flags (or --policy FILE) make, with the enforcement sandboxd would give it:
the host tree read-only in a root directory of the bundle's own, the write
roots, carve-outs and deny paths as mounts, sandboxd's seccomp filter, no
capabilities, no_new_privs, the sandbox uid, the limits as cgroup
resources. Nothing is dialed. A field no OCI config can express
(--allow-host, --allow-children, --timeout, --output-limit) is refused with
its name, never dropped.

Run it with an empty DIR beside config.json:

  mkdir -p bundle/rootfs && sandboxctl export-oci --write "$PWD" -- make > bundle/config.json
  runc run --bundle bundle NAME

flags:
`

func exportOCIVerb(_ context.Context, c *cli, args []string) int {
	var f runFlags
	fs := flag.NewFlagSet("sandboxctl export-oci", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), exportUsage)
		fs.PrintDefaults()
	}
	f.register(fs)
	rootfs := fs.String("rootfs", "rootfs", "the config's root.path `DIR`, an empty directory (relative: to the bundle)")
	uid := fs.Uint("sandbox-uid", 65533, "host `UID` the sandbox runs as, as sandboxd --sandbox-uid")
	gid := fs.Uint("sandbox-gid", 65533, "host `GID` the sandbox runs as, as sandboxd --sandbox-gid")
	if code, ok := c.parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		c.usageError(fs.Name(), "missing command")
		return exitUsage
	}
	if runtime.GOOS == "windows" {
		fmt.Fprintln(c.stderr, "sandboxctl export-oci: it writes configs for Linux, whose paths a Windows policy cannot name")
		return exitFailed
	}
	if f.detach {
		fmt.Fprintln(c.stderr, "sandboxctl export-oci: --detach is the runtime's (runc run --detach)")
		return exitUsage
	}
	wd, _ := os.Getwd()
	start, err := f.start(fs.Args(), wd)
	if err != nil {
		fmt.Fprintf(c.stderr, "sandboxctl export-oci: %v\n", err)
		return exitUsage
	}
	sock := c.socket
	if sock == "" {
		sock = socketpath.Default()
	}
	spec, err := oci.Export(oci.Input{
		Policy: start.Policy, Argv: start.Command.Argv, Env: start.Command.Env, Cwd: start.Command.Cwd,
		Terminal: f.tty, UID: uint32(*uid), GID: uint32(*gid), Home: home(*uid), Root: *rootfs,
		Exists: hostExists,
		// The daemon's own sockets, masked as the daemon masks them.
		HideSockets: []string{sock, filepath.Join(filepath.Dir(sock), "sandboxd-sessions")},
		// And its state, where the daemon would find it ($SANDBOXD_STATE_DIR
		// or the default): a container granted / must not write the
		// journal the next daemon obeys.
		Protect: []string{resolved(statedir.Default())},
	})
	if err != nil {
		fmt.Fprintf(c.stderr, "sandboxctl export-oci: %v\n", err)
		return exitFailed
	}
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(spec); err != nil {
		fmt.Fprintf(c.stderr, "sandboxctl export-oci: %v\n", err)
		return exitFailed
	}
	return 0
}

// home is uid's home directory in the host's passwd file, "" when it has
// none, as the daemon gives it.
func home(uid uint) string {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil || !filepath.IsAbs(u.HomeDir) {
		return ""
	}
	return u.HomeDir
}

func hostExists(path string) (exists, isDir bool) {
	st, err := os.Lstat(path)
	if err != nil {
		return false, false
	}
	return true, st.IsDir()
}

// resolved is the absolute path p through its symlinks where it exists,
// as the daemon protects its state directory.
func resolved(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}
