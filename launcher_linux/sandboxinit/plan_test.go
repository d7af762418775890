package sandboxinit

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	pathpkg "path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxd/sandboxd/internal/initbuild"
)

// harness is the C plan decoder's test harness, built with the sanitizers
// and started once per test process: it decodes each plan it is sent and
// answers with what it decoded, as FormatPlan prints it.
var harness struct {
	once sync.Once
	err  error
	mu   sync.Mutex
	in   io.WriteCloser
	out  *bufio.Reader
}

func decodeInC(t testing.TB, b []byte) string {
	t.Helper()
	harness.once.Do(func() {
		dir, err := os.MkdirTemp("", "plandump-")
		if err != nil {
			harness.err = err
			return
		}
		path := filepath.Join(dir, "plandump")
		if harness.err = initbuild.Harness(path); harness.err != nil {
			return
		}
		cmd := exec.Command(path)
		cmd.Stderr = os.Stderr
		if harness.in, harness.err = cmd.StdinPipe(); harness.err != nil {
			return
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			harness.err = err
			return
		}
		harness.out = bufio.NewReader(out)
		harness.err = cmd.Start()
		// The binary is open or running now; its directory can go.
		os.RemoveAll(dir)
	})
	if harness.err != nil {
		t.Fatal(harness.err)
	}
	harness.mu.Lock()
	defer harness.mu.Unlock()
	frame := binary.LittleEndian.AppendUint32(nil, uint32(len(b)))
	if _, err := harness.in.Write(append(frame, b...)); err != nil {
		t.Fatalf("write to the harness: %v (did a sanitizer stop it? see stderr)", err)
	}
	var n uint32
	if err := binary.Read(harness.out, binary.LittleEndian, &n); err != nil {
		t.Fatalf("read from the harness: %v (did a sanitizer stop it? see stderr)", err)
	}
	got := make([]byte, n)
	if _, err := io.ReadFull(harness.out, got); err != nil {
		t.Fatalf("read from the harness: %v", err)
	}
	return string(got)
}

// fullPlan has every field set, with bytes a C string must get through.
func fullPlan() *Plan {
	return &Plan{
		Namespaces: true, NetNS: true, Hostname: "sandbox",
		ProxyListen: "127.0.0.1:3128", LoopbackForwards: []uint16{5432, 65535},
		Mounts: []MountStep{
			{Kind: MountRootReadOnly, Source: "/", Target: "/", Field: "process"},
			{Kind: MountBind, Source: "/home/u/ws", Target: "/home/u/ws", Field: "filesystem.write[0]", Idmapped: true},
			{Kind: MountTmpfs, Target: "/tmp", Mode: 0o1777, Field: "process"},
			{Kind: MountTmpfs, Target: "/home/u/.ssh", Mode: 0o700, ReadOnly: true, Field: "filesystem.deny"},
			{Kind: MountFile, Target: "/etc/passwd", Content: "u:x:1000:1000::/home/u:/bin/sh\n\"quoted\" \\ \xff", Field: "process"},
			{Kind: MountFile, Target: "/etc/group", Shared: true, Field: "process"},
			{Kind: MountPlaceholder, Source: "/home/u/ws/new", Via: "/home/u/ws", Field: "filesystem.deny"},
			{Kind: MountSymlink, Source: "pts/ptmx", Target: "/dev/ptmx", Optional: true, Field: "process"},
			{Kind: MountDevice, Source: "/dev/null", Target: "/dev/null", Field: "process"},
			{Kind: MountRebindReadOnly, Target: "/home/u/ws/.git", Field: "filesystem.read_only"},
			{Kind: MountPin, Target: "/home/u/ws/.git", Field: "filesystem.read_only"},
			{Kind: MountProc, Target: "/proc", Field: "process"},
			{Kind: MountDevpts, Target: "/dev/pts", Field: "process"},
			{Kind: MountMaskFile, Target: "/home/u/.netrc", Field: "filesystem.deny"},
		},
		Exec: ExecPlan{
			Argv: []string{"sh", "-c", "echo 'ü' \"$HOME\"", ""}, Env: []string{"PATH=/bin", "HOME=/home/u", "EMPTY="},
			Cwd: "/home/u/ws", UID: 1000, GID: 4294967295, Terminal: true, Rows: 24, Cols: 80,
			Landlock: LandlockPlan{
				ABI: 6, HandledFS: 1<<16 - 1, Scoped: 3, ReadAccess: LLReadFile | LLExecute,
				Rules:      []LandlockRule{{Path: "/", Access: LLReadFile}, {Path: "/home/u/ws", Access: 1<<63 | 7}},
				ReadExcept: []string{"/home/u/.ssh", "/etc/shadow"}, Strict: true,
			},
			Seccomp:      Program{{Code: 0x20, K: 4}, {Code: 0x15, Jt: 1, Jf: 0, K: 0xc000003e}, {Code: 0x06, K: 0x7fc00000}},
			TerminalRule: true, Listener: true,
			WriteRoots: []string{"/home/u/ws", "/tmp"}, CgroupTasks: 3,
		},
	}
}

func TestPlanRoundTripsThroughTheCDecoder(t *testing.T) {
	for name, p := range map[string]*Plan{
		"full":    fullPlan(),
		"minimal": {Exec: ExecPlan{Argv: []string{"/bin/true"}, Cwd: "/"}},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := p.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := decodeInC(t, b), FormatPlan(p); got != want {
				t.Errorf("the C decoder read\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestPlanEncoderRefusesWhatCannotTravel(t *testing.T) {
	for name, p := range map[string]*Plan{
		"NUL in an argument": {Exec: ExecPlan{Argv: []string{"a\x00b"}, Cwd: "/"}},
		"NUL in a mount":     {Mounts: []MountStep{{Kind: MountBind, Source: "/a\x00"}}, Exec: ExecPlan{Argv: []string{"x"}, Cwd: "/"}},
		"no command":         {Exec: ExecPlan{Cwd: "/"}},
		"unknown mount kind": {Mounts: []MountStep{{Kind: "overlay"}}, Exec: ExecPlan{Argv: []string{"x"}, Cwd: "/"}},
		"IPv6 proxy":         {ProxyListen: "[::1]:3128", Exec: ExecPlan{Argv: []string{"x"}, Cwd: "/"}},
		"ID-mapped root":     {Mounts: []MountStep{{Kind: MountBind, Source: "/w", Target: "/", Idmapped: true}}, Exec: ExecPlan{Argv: []string{"x"}, Cwd: "/"}},
		"ID-mapped /a/..":    {Mounts: []MountStep{{Kind: MountBind, Source: "/w", Target: "/a/..", Idmapped: true}}, Exec: ExecPlan{Argv: []string{"x"}, Cwd: "/"}},
		"shared bind":        {Mounts: []MountStep{{Kind: MountBind, Source: "/w", Target: "/w", Shared: true}}, Exec: ExecPlan{Argv: []string{"x"}, Cwd: "/"}},
		"shared content":     {Mounts: []MountStep{{Kind: MountFile, Target: "/f", Content: "c", Shared: true}}, Exec: ExecPlan{Argv: []string{"x"}, Cwd: "/"}},
		"shared ID-mapped":   {Mounts: []MountStep{{Kind: MountFile, Target: "/f", Shared: true, Idmapped: true, Field: "filesystem.write"}}, Exec: ExecPlan{Argv: []string{"x"}, Cwd: "/"}},
		"shared with source": {Mounts: []MountStep{{Kind: MountFile, Source: "/w", Target: "/f", Shared: true}}, Exec: ExecPlan{Argv: []string{"x"}, Cwd: "/"}},
	} {
		if b, err := p.MarshalBinary(); err == nil {
			t.Errorf("%s: encoded to %q", name, b)
		}
	}
}

// Every cut of a valid plan, and every byte of it changed, is refused or
// decoded without a sanitizer stopping the harness.
func TestPlanDecoderRefusesBrokenPlans(t *testing.T) {
	b, err := fullPlan().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(b); n++ {
		if got := decodeInC(t, b[:n]); !strings.HasPrefix(got, "error: ") {
			t.Fatalf("a plan cut to %d of %d bytes decoded to\n%s", n, len(b), got)
		}
	}
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0xff
		decodeInC(t, c)
	}
	flags := []byte{tagFlags, 4, 0, 0, 0, 0, 0, 0, 0}
	if got := decodeInC(t, append(append(flags, b[len(planMagic):]...), b[:len(planMagic)]...)); !strings.HasPrefix(got, "error: ") {
		t.Errorf("a plan without its magic number decoded to\n%s", got)
	}
	twice := append(append([]byte(planMagic), flags...), b[len(planMagic):]...)
	if got := decodeInC(t, twice); !strings.HasPrefix(got, "error: ") {
		t.Errorf("a plan with two flags records decoded to\n%s", got)
	}
	if got := decodeInC(t, append(b, flags...)); !strings.HasPrefix(got, "error: ") {
		t.Errorf("a plan with a record after its end decoded to\n%s", got)
	}
}

// An ID-mapped bind stacked on the sandbox's root would leave every later
// step beneath it, unseen: the decoder refuses one whose target names the
// root, however spelled, and takes one beneath it.
func TestPlanDecoderRefusesAnIDMappedRoot(t *testing.T) {
	refusesIDMapped(t, "/t", "an ID-mapped mount step targets the sandbox's root", map[string]bool{
		"/": true, "": true, "//": true, "/.": true, "/..": true, "/a/..": true, "a/../..": true, "/./": true,
		"/a": false, "/a/../b": false, "/..a": false, "/...": false,
	}, func(m *MountStep, v string) { m.Target = v })
}

// Only a filesystem field's target is opened without following symlinks,
// so an ID-mapped step serving any other field could follow one to the
// root: both sides refuse it.
func TestPlanDecoderRefusesAnIDMappedStepOfAnotherField(t *testing.T) {
	refusesIDMapped(t, "filesystem.write", "an ID-mapped mount step serves no filesystem field", map[string]bool{
		"filesystem.write": false, "filesystem.layer": false,
		"process": true, "": true, "filesystem": true, "network.mode": true,
	}, func(m *MountStep, v string) { m.Field = v })
}

// What the daemon sends for a shared step is attached as the file of a
// file step: the decoder refuses the flag on any other step, or on one
// with content of its own or an ID-mapped clone coming for it.
func TestPlanDecoderRefusesASharedStepThatIsNoFile(t *testing.T) {
	for name, c := range map[string]struct {
		step       MountStep
		kind, flag byte
	}{
		"a bind":           {MountStep{Kind: MountBind, Source: "/s", Target: "/t", Field: "filesystem.write"}, 0, mountShared},
		"content":          {MountStep{Kind: MountFile, Target: "/t", Content: "c", Field: "process"}, 0, mountShared},
		"ID-mapped":        {MountStep{Kind: MountFile, Target: "/t", Shared: true, Field: "filesystem.write"}, 0, mountIdmapped},
		"a shared symlink": {MountStep{Kind: MountFile, Target: "/t", Shared: true, Field: "process"}, 10, 0},
	} {
		p := &Plan{Mounts: []MountStep{c.step}, Exec: ExecPlan{Argv: []string{"x"}, Cwd: "/"}}
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeInC(t, b); strings.HasPrefix(got, "error: ") {
			t.Fatalf("%s: the plan before the change decoded to\n%s", name, got)
		}
		rec := mountRecord(t, b)
		if c.kind != 0 {
			b[rec] = c.kind
		}
		b[rec+1] |= c.flag
		if got := decodeInC(t, b); got != "error: a shared mount step is not an unmapped file step without content\n" {
			t.Errorf("%s: decoded to\n%s", name, got)
		}
	}
}

// The init finds an ID-mapped clone by its step's source: a shared step
// naming one could have the daemon's file taken for the clone, so the
// decoder refuses a shared step with any source, and takes one without.
func TestPlanDecoderRefusesASharedStepWithASource(t *testing.T) {
	for source, refused := range map[string]bool{"": false, "/w": true, "/": true, "x": true} {
		p := &Plan{Mounts: []MountStep{{Kind: MountFile, Source: source, Target: "/t", Field: "process"}}, Exec: ExecPlan{Argv: []string{"x"}, Cwd: "/"}}
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		b[mountRecord(t, b)+1] |= mountShared
		got := decodeInC(t, b)
		if refused != (got == "error: a shared mount step has a source\n") || !refused && strings.HasPrefix(got, "error: ") {
			t.Errorf("source %q: decoded to\n%s", source, got)
		}
	}
}

// mountRecord is where the encoded plan's first mount record's bytes
// start: its kind, then its flags.
func mountRecord(t *testing.T, b []byte) int {
	t.Helper()
	return recordOf(t, b, tagMount)
}

// recordOf is where the bytes of the encoded plan's first record of tag
// start.
func recordOf(t *testing.T, b []byte, tag byte) int {
	t.Helper()
	for rec := len(planMagic); rec+5 <= len(b); rec += 5 + int(binary.LittleEndian.Uint32(b[rec+1:])) {
		if b[rec] == tag {
			return rec + 5
		}
	}
	t.Fatalf("no record of tag %d in %q", tag, b)
	return 0
}

// More cgroup files than the init receives would go unjoined, and a
// Landlock ABI beyond an int is no Landlock to its applier: the decoder
// refuses both, lest the command run outside its limits or its Landlock
// domain, and the encoder does too.
func TestPlanDecoderRefusesWhatTheInitCannotApply(t *testing.T) {
	for name, c := range map[string]struct {
		tag     byte
		off     int
		v       uint32
		refused bool
	}{
		"16 cgroup files":     {tag: tagIDs, off: 12, v: maxCgroupTasks},
		"17 cgroup files":     {tag: tagIDs, off: 12, v: maxCgroupTasks + 1, refused: true},
		"2^31 cgroup files":   {tag: tagIDs, off: 12, v: 1 << 31, refused: true},
		"2^32-1 cgroup files": {tag: tagIDs, off: 12, v: 1<<32 - 1, refused: true},
		"Landlock ABI 2^31-1": {tag: tagLandlock, v: 1<<31 - 1},
		"Landlock ABI 2^31":   {tag: tagLandlock, v: 1 << 31, refused: true},
		"Landlock ABI 2^32-1": {tag: tagLandlock, v: 1<<32 - 1, refused: true},
	} {
		want := "error: more cgroup files than the init takes\n"
		set := func(x *ExecPlan, v int) { x.CgroupTasks = v }
		if c.tag == tagLandlock {
			want = "error: a landlock ABI beyond any kernel's\n"
			set = func(x *ExecPlan, v int) { x.Landlock.ABI = v }
		}
		p := &Plan{Exec: ExecPlan{Argv: []string{"x"}, Cwd: "/"}}
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		binary.LittleEndian.PutUint32(b[recordOf(t, b, c.tag)+c.off:], c.v)
		if got := decodeInC(t, b); c.refused != (got == want) || !c.refused && strings.HasPrefix(got, "error: ") {
			t.Errorf("%s: decoded to\n%s", name, got)
		}
		set(&p.Exec, int(c.v))
		if _, err := p.MarshalBinary(); (err != nil) != c.refused {
			t.Errorf("%s: the encoder gave %v", name, err)
		}
	}
}

// The init keeps a directory's fd by the spelling of its path, cut to
// PATH_MAX: the decoder refuses a target of PATH_MAX bytes or more, which
// a cut would make name a shorter one's directory, and takes one a byte
// shorter.
func TestPlanDecoderRefusesATargetOfPathMax(t *testing.T) {
	const pathMax = 4096
	for n, refused := range map[int]bool{pathMax - 1: false, pathMax: true, 2 * pathMax: true} {
		p := &Plan{Exec: ExecPlan{Argv: []string{"x"}, Cwd: "/"}}
		p.Mounts = []MountStep{{Kind: MountBind, Source: "/s", Target: "/t", Field: "filesystem.write"}}
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		got := decodeInC(t, swapMountString(t, b, "/t", "/"+strings.Repeat("a", n-1)))
		if refused != (got == "error: a mount step's target is longer than PATH_MAX\n") || !refused && strings.HasPrefix(got, "error: ") {
			t.Errorf("a target of %d bytes decoded to\n%s", n, got)
		}
	}
}

// refusesIDMapped checks, for each value, that the decoder refuses (with
// want) or takes an ID-mapped bind whose string old is swapped for value,
// and that the encoder, given the value through set, does the same. The
// decoder is tested on its own, on a plan the encoder made with old.
func refusesIDMapped(t *testing.T, old, want string, values map[string]bool, set func(*MountStep, string)) {
	t.Helper()
	for v, refused := range values {
		p := &Plan{Exec: ExecPlan{Argv: []string{"x"}, Cwd: "/"}}
		p.Mounts = []MountStep{{Kind: MountBind, Source: "/s", Target: "/t", Field: "filesystem.write", Idmapped: true}}
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		got := decodeInC(t, swapMountString(t, b, old, v))
		if refused != (got == "error: "+want+"\n") || !refused && strings.HasPrefix(got, "error: ") {
			t.Errorf("%q: decoded to\n%s", v, got)
		}
		set(&p.Mounts[0], v)
		if _, err := p.MarshalBinary(); (err != nil) != refused {
			t.Errorf("%q: the encoder gave %v", v, err)
		}
	}
}

// swapMountString replaces the string old of the encoded plan's only mount
// record with s, and the record's length with it.
func swapMountString(t *testing.T, b []byte, old, s string) []byte {
	t.Helper()
	enc := func(v string) string {
		return string(binary.LittleEndian.AppendUint32(nil, uint32(len(v)+1))) + v + "\x00"
	}
	i := strings.Index(string(b), enc(old))
	if i < 0 {
		t.Fatalf("no string %q in %q", old, b)
	}
	out := append(append(append([]byte(nil), b[:i]...), enc(s)...), b[i+len(enc(old)):]...)
	for rec := len(planMagic); rec+5 <= len(b); {
		n := int(binary.LittleEndian.Uint32(b[rec+1:]))
		if rec+5 <= i && i < rec+5+n {
			if b[rec] != tagMount {
				t.Fatalf("%q is in a record of tag %d, not a mount", old, b[rec])
			}
			binary.LittleEndian.PutUint32(out[rec+1:], uint32(n+len(s)-len(old)))
			return out
		}
		rec += 5 + n
	}
	t.Fatalf("no record holds %q", old)
	return nil
}

// FuzzPlanRoundTrip builds plans from the fuzzer's values: whatever the
// encoder takes, the C decoder must read back as it was.
func FuzzPlanRoundTrip(f *testing.F) {
	f.Add("sh", "PATH=/bin", "/tmp", "filesystem.deny", uint8(2), uint32(0o755), uint64(7), []byte{0x20, 0, 0, 0, 4, 0, 0, 0}, uint16(80), true)
	f.Add("", "", "", "", uint8(0), uint32(0), uint64(0), []byte{}, uint16(0), false)
	f.Fuzz(func(t *testing.T, arg, env, path, field string, kind uint8, mode uint32, access uint64, prog []byte, port uint16, flag bool) {
		p := &Plan{
			Namespaces: flag, NetNS: !flag, Hostname: field,
			LoopbackForwards: []uint16{port},
			Mounts: []MountStep{{
				Kind: mountKinds[int(kind)%len(mountKinds)], Source: path, Target: arg, Content: env + "\x00"[:0] + string(prog),
				Field: field, Via: path, Mode: mode, ReadOnly: flag, Optional: !flag, Idmapped: flag,
			}},
			Exec: ExecPlan{
				Argv: []string{arg, env}, Env: []string{env}, Cwd: path, UID: mode, GID: ^mode,
				Rows: port, Cols: ^port, Terminal: flag, TerminalRule: !flag, Listener: flag,
				Landlock: LandlockPlan{
					ABI: int(kind), HandledFS: access, Scoped: ^access, ReadAccess: access >> 1,
					Rules: []LandlockRule{{Path: path, Access: access}}, ReadExcept: []string{arg}, Strict: flag,
				},
				WriteRoots: []string{field}, CgroupTasks: int(kind) % (maxCgroupTasks + 2),
			},
		}
		if flag {
			p.ProxyListen = fmt.Sprintf("127.0.%d.1:%d", kind, port)
		}
		for i := 0; i+8 <= len(prog) && i < 8*4096; i += 8 {
			p.Exec.Seccomp = append(p.Exec.Seccomp, SockFilter{
				Code: binary.LittleEndian.Uint16(prog[i:]), Jt: prog[i+2], Jf: prog[i+3], K: binary.LittleEndian.Uint32(prog[i+4:]),
			})
		}
		b, err := p.MarshalBinary()
		if err != nil {
			// Only a NUL stops the encoder here, an ID-mapped step on
			// the root or of no filesystem field, or more cgroup files
			// than the init takes.
			if !strings.Contains(arg+env+path+field+string(prog), "\x00") &&
				!(flag && (pathpkg.Clean("/"+arg) == "/" || !strings.HasPrefix(field, "filesystem."))) &&
				p.Exec.CgroupTasks <= maxCgroupTasks {
				t.Fatalf("encoder refused %+v: %v", p, err)
			}
			return
		}
		if got, want := decodeInC(t, b), FormatPlan(p); got != want {
			t.Errorf("the C decoder read\n%s\nwant\n%s", got, want)
		}
	})
}

// FuzzPlanDecoder sends the C decoder arbitrary bytes: it must refuse or
// decode them without a sanitizer stopping it, and a plan it decodes must
// encode back to the same bytes.
func FuzzPlanDecoder(f *testing.F) {
	b, err := fullPlan().MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(planMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeInC(t, b)
	})
}

// A plan appended to a buffer is the plan's encoding after what the
// buffer held: the daemon encodes into a buffer it reuses, and the
// records' lengths must not count what came before.
func TestAppendBinaryAppends(t *testing.T) {
	want, err := fullPlan().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	prefix := []byte("reused")
	got, err := fullPlan().AppendBinary(append(make([]byte, 0, 8), prefix...))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("appended to %q:\n%q\nwant the prefix, then\n%q", prefix, got, want)
	}
}
