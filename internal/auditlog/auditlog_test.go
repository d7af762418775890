package auditlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

type rec struct {
	Seq  int    `json:"seq"`
	Pad  string `json:"pad,omitempty"`
	From int    `json:"from,omitempty"`
}

func open(t *testing.T, o Options) *Log {
	t.Helper()
	l, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func closeLog(t *testing.T, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, l *Log, r any) {
	t.Helper()
	if err := l.Write(r); err != nil {
		t.Fatal(err)
	}
}

// readAll returns every record in dir, failing on any line that is not a
// whole record.
func readAll(t *testing.T, dir string) []rec {
	t.Helper()
	var out []rec
	err := Read(dir, func(line []byte) error {
		var r rec
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("%q: %w", line, err)
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func wantSeqs(t *testing.T, got []rec, from, to int) {
	t.Helper()
	if len(got) != to-from {
		t.Fatalf("read %d records, want %d", len(got), to-from)
	}
	for i, r := range got {
		if r.Seq != from+i {
			t.Fatalf("record %d has seq %d, want %d", i, r.Seq, from+i)
		}
	}
}

// files lists the names in dir other than the lock file.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != lockName {
			names = append(names, e.Name())
		}
	}
	return names
}

func lineLen(t *testing.T, r any) int64 {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(b) + 1)
}

func TestRotationKeepsOrder(t *testing.T) {
	dir := t.TempDir()
	const max = 1024
	l := open(t, Options{Dir: dir, MaxBytes: max, Keep: 1000})
	const n = 2000
	for i := range n {
		write(t, l, rec{Seq: i, Pad: strings.Repeat("x", i%50)})
	}
	closeLog(t, l)

	wantSeqs(t, readAll(t, dir), 0, n)
	names := files(t, dir)
	if len(names) < 10 {
		t.Fatalf("expected many rotations, got files %v", names)
	}
	for _, name := range names {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > max {
			t.Errorf("%s is %d bytes, over MaxBytes %d", name, st.Size(), max)
		}
	}
}

func TestRestartAppendsAndCountsExistingSize(t *testing.T) {
	dir := t.TempDir()
	// Every record below encodes to the same length; five fit in a file.
	size := lineLen(t, rec{Seq: 0})
	o := Options{Dir: dir, MaxBytes: 5 * size}

	l := open(t, o)
	for i := range 3 {
		write(t, l, rec{Seq: i})
	}
	closeLog(t, l)

	l = open(t, o)
	for i := 3; i < 6; i++ {
		write(t, l, rec{Seq: i})
	}
	closeLog(t, l)

	wantSeqs(t, readAll(t, dir), 0, 6)
	// Had Open started counting from zero, all six would sit in audit.log.
	rotated, err := os.ReadFile(filepath.Join(dir, "audit.log.1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(rotated), "\n"); got != 5 {
		t.Errorf("audit.log.1 holds %d lines, want 5", got)
	}
}

func TestKeepDropsOldest(t *testing.T) {
	dir := t.TempDir()
	// MaxBytes 1: every record goes to a file of its own.
	l := open(t, Options{Dir: dir, MaxBytes: 1, Keep: 2})
	for i := range 6 {
		write(t, l, rec{Seq: i})
	}
	closeLog(t, l)

	if got, want := strings.Join(files(t, dir), " "), "audit.log audit.log.1 audit.log.2"; got != want {
		t.Errorf("files %q, want %q", got, want)
	}
	wantSeqs(t, readAll(t, dir), 3, 6)
}

func TestLoweringKeepPrunesOnNextRotation(t *testing.T) {
	dir := t.TempDir()
	l := open(t, Options{Dir: dir, MaxBytes: 1, Keep: 5})
	for i := range 6 {
		write(t, l, rec{Seq: i})
	}
	closeLog(t, l)

	l = open(t, Options{Dir: dir, MaxBytes: 1, Keep: 1})
	write(t, l, rec{Seq: 6})
	closeLog(t, l)

	if got, want := strings.Join(files(t, dir), " "), "audit.log audit.log.1"; got != want {
		t.Errorf("files %q, want %q", got, want)
	}
	wantSeqs(t, readAll(t, dir), 5, 7)
}

func TestRecordLargerThanMaxBytesIsWrittenWhole(t *testing.T) {
	dir := t.TempDir()
	l := open(t, Options{Dir: dir, MaxBytes: 100})
	write(t, l, rec{Seq: 0})
	write(t, l, rec{Seq: 1, Pad: strings.Repeat("y", 200_000)})
	write(t, l, rec{Seq: 2})
	closeLog(t, l)

	got := readAll(t, dir)
	wantSeqs(t, got, 0, 3)
	if len(got[1].Pad) != 200_000 {
		t.Errorf("large record came back with %d bytes of padding", len(got[1].Pad))
	}
	big, err := os.ReadFile(filepath.Join(dir, "audit.log.1"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(big), "\n") != 1 || !strings.Contains(string(big), `"seq":1`) {
		t.Errorf("audit.log.1 should hold only the large record, got %d bytes", len(big))
	}
}

func TestTornLastLine(t *testing.T) {
	dir := t.TempDir()
	l := open(t, Options{Dir: dir})
	write(t, l, rec{Seq: 0})
	write(t, l, rec{Seq: 1})
	closeLog(t, l)

	// What a crash in the middle of a write leaves.
	f, err := os.OpenFile(filepath.Join(dir, "audit.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"seq":2,"pa`); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, readAll(t, dir), 0, 2)

	// The restarted daemon must not glue its first record to the fragment.
	l = open(t, Options{Dir: dir})
	write(t, l, rec{Seq: 2})
	closeLog(t, l)
	wantSeqs(t, readAll(t, dir), 0, 3)
	if got := files(t, dir); len(got) != 2 {
		t.Errorf("expected the torn file rotated away, files %v", got)
	}
}

func TestConcurrentWritersProduceWholeLines(t *testing.T) {
	dir := t.TempDir()
	l := open(t, Options{Dir: dir, MaxBytes: 4096, Keep: 10000})
	const writers, each = 16, 300
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := l.Write(rec{From: w, Seq: i, Pad: strings.Repeat("z", (w*7+i)%97)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	closeLog(t, l)

	got := readAll(t, dir)
	if len(got) != writers*each {
		t.Fatalf("read %d records, want %d", len(got), writers*each)
	}
	next := make([]int, writers)
	for _, r := range got {
		if r.Seq != next[r.From] {
			t.Fatalf("writer %d: got seq %d, want %d", r.From, r.Seq, next[r.From])
		}
		next[r.From]++
	}
}

func TestSecondOpenRefused(t *testing.T) {
	dir := t.TempDir()
	l := open(t, Options{Dir: dir})
	_, err := Open(Options{Dir: dir})
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open: got %v, want ErrInUse", err)
	}
	if want := "audit log " + dir + " is in use by another sandboxd"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	closeLog(t, l)
	closeLog(t, open(t, Options{Dir: dir}))
}

func TestModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("unix permission bits")
	}
	dir := filepath.Join(t.TempDir(), "state", "audit")
	l := open(t, Options{Dir: dir})
	write(t, l, rec{})
	closeLog(t, l)
	for path, want := range map[string]os.FileMode{dir: 0o700, l.Path(): 0o600} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, st.Mode().Perm(), want)
		}
	}
}

func TestEncodings(t *testing.T) {
	dir := t.TempDir()
	l := open(t, Options{Dir: dir})
	msg, err := structpb.NewStruct(map[string]any{"event": "start", "argv": []any{"sh", "-c", "a && b"}})
	if err != nil {
		t.Fatal(err)
	}
	write(t, l, msg)
	write(t, l, map[string]string{"argv": "a && b <x>"})
	if err := l.WriteJSON([]byte("{\n  \"indented\": \"a\\nb\"\n}\n")); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "[1]", `"s"`, "{", "{} {}"} {
		if err := l.WriteJSON([]byte(bad)); err == nil {
			t.Errorf("WriteJSON(%q) accepted", bad)
		}
	}
	if err := l.Write(func() {}); err == nil {
		t.Error("Write of an unencodable value accepted")
	}
	closeLog(t, l)
	if err := l.Write(rec{}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Write after Close: %v, want os.ErrClosed", err)
	}

	var lines []string
	if err := Read(dir, func(line []byte) error {
		lines = append(lines, string(line))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"argv":["sh","-c","a && b"],"event":"start"}`,
		`{"argv":"a && b <x>"}`,
		`{"indented":"a\nb"}`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

func TestReadStopsOnCallbackError(t *testing.T) {
	dir := t.TempDir()
	l := open(t, Options{Dir: dir})
	write(t, l, rec{Seq: 0})
	write(t, l, rec{Seq: 1})
	closeLog(t, l)

	stop := errors.New("stop")
	calls := 0
	err := Read(dir, func([]byte) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("Read: err %v after %d calls, want stop after 1", err, calls)
	}
	if err := Read(filepath.Join(dir, "missing"), func([]byte) error { return nil }); err == nil {
		t.Error("Read of a missing directory succeeded")
	}
}

func TestOpenRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{{}, {Dir: t.TempDir(), MaxBytes: -1}, {Dir: t.TempDir(), Keep: -1}} {
		if l, err := Open(o); err == nil {
			l.Close()
			t.Errorf("Open(%+v) succeeded", o)
		}
	}
}

// blockRotation puts a directory where rotation must rename audit.log to,
// and returns a function that removes it.
func blockRotation(t *testing.T, dir string) func() {
	t.Helper()
	blocker := filepath.Join(dir, "audit.log.1")
	if err := os.MkdirAll(filepath.Join(blocker, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.RemoveAll(blocker); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRotationFailureKeepsRecords(t *testing.T) {
	dir := t.TempDir()
	l := open(t, Options{Dir: dir, MaxBytes: 1})
	write(t, l, rec{Seq: 0})
	unblock := blockRotation(t, dir)
	if err := l.Write(rec{Seq: 1}); !errors.Is(err, ErrRotate) {
		t.Fatalf("Write with rotation blocked: %v, want ErrRotate", err)
	}
	wantSeqs(t, readAll(t, dir), 0, 2)
	unblock()
	write(t, l, rec{Seq: 2})
	closeLog(t, l)
	wantSeqs(t, readAll(t, dir), 0, 3)
}

func TestTornFileNotAppendedWhenRotationFails(t *testing.T) {
	dir := t.TempDir()
	current := filepath.Join(dir, "audit.log")
	if err := os.WriteFile(current, []byte("{\"seq\":0}\n{\"seq\":1,"), 0o600); err != nil {
		t.Fatal(err)
	}
	unblock := blockRotation(t, dir)
	l := open(t, Options{Dir: dir})
	if err := l.Write(rec{Seq: 1}); err == nil || errors.Is(err, ErrRotate) {
		t.Fatalf("Write onto a torn file with rotation blocked: %v, want a refusal", err)
	}
	if b, err := os.ReadFile(current); err != nil || string(b) != "{\"seq\":0}\n{\"seq\":1," {
		t.Fatalf("torn file changed to %q (%v)", b, err)
	}
	unblock()
	write(t, l, rec{Seq: 1})
	closeLog(t, l)
	wantSeqs(t, readAll(t, dir), 0, 2)
}

// A symlink at audit.log is not followed: the daemon would write every
// session's policy wherever it leads.
func TestOpenRefusesASymlinkedLog(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.Symlink(target, filepath.Join(dir, "audit.log")); err != nil {
		t.Skipf("no symlink here: %v", err)
	}
	if runtime.GOOS == "windows" {
		t.Skip("Windows has no O_NOFOLLOW; the state directory's ACL keeps others out")
	}
	if l, err := Open(Options{Dir: dir}); err == nil {
		l.Close()
		t.Fatal("the audit log opened through a symlink")
	}
	if _, err := os.Lstat(target); err == nil {
		t.Error("the audit log made the symlink's target")
	}
}
