// Package auditlog keeps the daemon's audit trail: one JSON object per line
// in audit.log under the daemon's state directory, appended across restarts
// and rotated by size into audit.log.1 (newest) .. audit.log.N.
//
// The trail records what the daemon decided and enforced (session starts
// with their policy, enforcement report and caller; denials; state
// transitions; ends). It must never contain session output: output can
// carry secrets the sandboxed program read, and the trail outlives the
// session. Keeping output out is the caller's job; this package cannot tell
// an argv from a terminal dump.
//
// Each line reaches the file with a single write(2) on an O_APPEND
// descriptor, so a crash leaves at most one partial line, and only at the
// end of a file; Read skips it. Lines are not fsynced one by one: a daemon
// crash loses nothing the kernel accepted, a power loss may lose the last
// few lines. Rotation syncs the file it retires and the directory.
package auditlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

const (
	fileName = "audit.log"
	lockName = "audit.lock"

	// DefaultMaxBytes is the rotation threshold when Options.MaxBytes is 0.
	DefaultMaxBytes = 16 << 20
	// DefaultKeep is the number of rotated files kept when Options.Keep is 0.
	DefaultKeep = 5
)

// ErrInUse reports that another process holds the audit log's directory.
var ErrInUse = errors.New("in use by another sandboxd")

// ErrRotate marks a Write whose record was appended although the rotation
// before it failed, so a caller logs the error rather than retrying the
// record (which would duplicate it).
var ErrRotate = errors.New("audit log rotation failed; record appended to the current file")

// Options configures Open.
type Options struct {
	Dir      string // created 0700 if missing
	MaxBytes int64  // rotate when the current file would exceed this; default 16 MiB
	Keep     int    // rotated files kept (audit.log.1 .. audit.log.N, .1 newest); default 5
}

// Log appends records to the audit trail. It is safe for concurrent use.
type Log struct {
	dir  string
	path string
	max  int64
	keep int

	mu     sync.Mutex
	lock   *os.File // held for the Log's lifetime; closing it releases the lock
	f      *os.File // nil after a failed (re)open; the next write retries
	size   int64
	torn   bool // f ends in a partial line; it must be rotated away before appending
	closed bool
}

// Open opens Dir/audit.log for appending, creating Dir (0700) and the file
// (0600) if needed. It fails with ErrInUse if another process has the
// directory open as an audit log.
func Open(o Options) (*Log, error) {
	if o.Dir == "" {
		return nil, errors.New("audit log: no directory")
	}
	if o.MaxBytes < 0 || o.Keep < 0 {
		return nil, fmt.Errorf("audit log %s: negative MaxBytes (%d) or Keep (%d)", o.Dir, o.MaxBytes, o.Keep)
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Keep == 0 {
		o.Keep = DefaultKeep
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	lock, err := lockDir(o.Dir)
	if err != nil {
		return nil, err
	}
	l := &Log{
		dir:  o.Dir,
		path: filepath.Join(o.Dir, fileName),
		max:  o.MaxBytes,
		keep: o.Keep,
		lock: lock,
	}
	if err := l.openCurrent(); err != nil {
		lock.Close()
		return nil, err
	}
	return l, nil
}

// Path returns the path of the current (unrotated) file.
func (l *Log) Path() string { return l.path }

// Write appends record as one line: protojson for a proto.Message,
// encoding/json otherwise. The record must encode to a JSON object. An
// error that is not ErrRotate means the record is not in the trail (a
// write cut short leaves a partial line that Read skips).
func (l *Log) Write(record any) error {
	var b []byte
	var err error
	if m, ok := record.(proto.Message); ok {
		b, err = protojson.Marshal(m)
	} else {
		// Without HTML escaping, so argv like "a && b" reads as written.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		err = enc.Encode(record)
		b = buf.Bytes()
	}
	if err != nil {
		return fmt.Errorf("audit log: encode %T: %w", record, err)
	}
	return l.WriteJSON(b)
}

// WriteJSON appends an already encoded JSON object as one line. Insignificant
// whitespace, newlines included, is removed, so indented JSON is accepted.
func (l *Log) WriteJSON(record []byte) error {
	var buf bytes.Buffer
	buf.Grow(len(record) + 1)
	if err := json.Compact(&buf, record); err != nil {
		return fmt.Errorf("audit log: record is not valid JSON: %w", err)
	}
	if buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return errors.New("audit log: record is not a JSON object")
	}
	buf.WriteByte('\n')
	return l.appendLine(buf.Bytes())
}

// WriteLine appends line, one compact JSON object and its newline, as it
// is. Unlike WriteJSON it does not parse the record: it is for a caller
// whose encoder is held by its tests to produce compact objects, and it
// only checks the line's ends and that it is one line. The Log does not
// keep line.
func (l *Log) WriteLine(line []byte) error {
	if len(line) < 3 || line[0] != '{' || bytes.IndexByte(line, '\n') != len(line)-1 || line[len(line)-2] != '}' {
		return errors.New("audit log: not one JSON object on one line")
	}
	return l.appendLine(line)
}

func (l *Log) appendLine(line []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("audit log %s: %w", l.path, os.ErrClosed)
	}
	if l.f == nil {
		if err := l.openCurrent(); err != nil {
			return err
		}
	}
	var rotateErr error
	if l.torn || l.size > 0 && l.size+int64(len(line)) > l.max {
		// A failed rotation leaves no file open; carry on with whatever
		// audit.log is now, as losing the record is worse than a big file.
		if rotateErr = l.rotate(); rotateErr != nil {
			if err := l.openCurrent(); err != nil {
				return errors.Join(rotateErr, err)
			}
			if l.torn {
				// Appending would glue the record to the partial line and
				// corrupt both in the middle of a file.
				return fmt.Errorf("audit log %s ends in a partial line and rotation failed: %w", l.path, rotateErr)
			}
		}
	}
	// One Write on an O_APPEND file is one write(2) (for records under the
	// runtime's 1 GiB chunk), so a crash cannot leave half a line followed
	// by more lines; only a short write (disk full) tears it, flagged below.
	n, err := l.f.Write(line)
	l.size += int64(n)
	if err != nil {
		if n > 0 {
			l.torn = true
		}
		return fmt.Errorf("audit log %s: %w", l.path, errors.Join(err, rotateErr))
	}
	if rotateErr != nil {
		return fmt.Errorf("%w: %w", ErrRotate, rotateErr)
	}
	return nil
}

// openCurrent opens audit.log and takes its size and whether it ends in a
// partial line from the file itself, so a restarted daemon rotates on
// schedule and never appends to a torn line.
func (l *Log) openCurrent() error {
	// os.OpenFile sets O_CLOEXEC, so sandboxed children never inherit the
	// trail. Never through a symlink: one there would have the daemon
	// write every session's policy, as root for a root daemon, wherever
	// it leads.
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_APPEND|os.O_CREATE|noFollow, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit log: %w", err)
	}
	torn := false
	if st.Size() > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], st.Size()-1); err != nil {
			f.Close()
			return fmt.Errorf("audit log %s: read last byte: %w", l.path, err)
		}
		torn = last[0] != '\n'
	}
	l.f, l.size, l.torn = f, st.Size(), torn
	return nil
}

// rotate retires audit.log as audit.log.1 and opens a fresh audit.log. On
// error l.f is nil.
func (l *Log) rotate() error {
	syncErr := l.f.Sync()
	closeErr := l.f.Close()
	l.f = nil
	if err := errors.Join(syncErr, closeErr); err != nil {
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	if err := l.shift(); err != nil {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		return fmt.Errorf("audit log: sync %s: %w", l.dir, err)
	}
	return l.openCurrent()
}

// shift renames audit.log.(K-1)→K .. audit.log→audit.log.1, first removing
// every rotated file numbered Keep or above, so lowering Keep across restarts
// shrinks the trail too.
func (l *Log) shift() error {
	nums, err := rotatedNumbers(l.dir)
	if err != nil {
		return err
	}
	for _, n := range slices.Backward(nums) {
		old := l.path + "." + strconv.Itoa(n)
		if n >= l.keep {
			if err := os.Remove(old); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("audit log: %w", err)
			}
			continue
		}
		if err := os.Rename(old, l.path+"."+strconv.Itoa(n+1)); err != nil {
			return fmt.Errorf("audit log: %w", err)
		}
	}
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	return nil
}

// Close syncs and closes the file and releases the directory lock.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("audit log %s: %w", l.path, os.ErrClosed)
	}
	l.closed = true
	var errs []error
	if l.f != nil {
		errs = append(errs, l.f.Sync(), l.f.Close())
		l.f = nil
	}
	errs = append(errs, l.lock.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("audit log %s: close: %w", l.path, err)
	}
	return nil
}

// rotatedNumbers lists the N of every audit.log.N in dir, ascending.
func rotatedNumbers(dir string) ([]int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	var nums []int
	for _, e := range entries {
		suffix, ok := strings.CutPrefix(e.Name(), fileName+".")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		// Only the names rotation makes: "audit.log.01" or "audit.log.+1"
		// are someone else's files.
		if n, err := strconv.Atoi(suffix); err == nil && n > 0 && strconv.Itoa(n) == suffix {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	return nums, nil
}

// Read calls fn with every complete line of the trail in dir, oldest first:
// the rotated files from the highest number down, then audit.log. A last
// line without its newline (a write cut short by a crash) is skipped. The
// line excludes the newline and is only valid until fn returns. An error
// from fn stops Read and is returned wrapped with the file and line number.
//
// Read takes no lock, so it may run beside a live daemon. It opens every
// file before reading any, newest first, and skips a file it already
// holds, so a rotation meanwhile neither reorders nor repeats lines; lines
// appended after Read started may be missed.
func Read(dir string, fn func(line []byte) error) error {
	nums, err := rotatedNumbers(dir)
	if err != nil {
		return err
	}
	names := []string{fileName}
	for _, n := range nums {
		names = append(names, fileName+"."+strconv.Itoa(n))
	}
	type opened struct {
		name string
		f    *os.File
		st   os.FileInfo
	}
	var files []opened // newest first
	defer func() {
		for _, o := range files {
			o.f.Close()
		}
	}()
	for _, name := range names {
		f, err := os.Open(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue // rotated away or never written
		}
		if err != nil {
			return fmt.Errorf("audit log: %w", err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return fmt.Errorf("audit log: %w", err)
		}
		if slices.ContainsFunc(files, func(o opened) bool { return os.SameFile(o.st, st) }) {
			f.Close()
			continue
		}
		files = append(files, opened{name, f, st})
	}
	for _, o := range slices.Backward(files) {
		if err := readLines(o.f, o.name, fn); err != nil {
			return err
		}
	}
	return nil
}

func readLines(f *os.File, name string, fn func([]byte) error) error {
	r := bufio.NewReaderSize(f, 64<<10)
	for lineNo := 1; ; lineNo++ {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A record longer than the buffer; gather it whole. The first
			// part aliases the buffer that ReadBytes is about to refill.
			first := bytes.Clone(line)
			var rest []byte
			rest, err = r.ReadBytes('\n')
			line = append(first, rest...)
		}
		if err == io.EOF {
			return nil // a non-empty line here lacks its newline: torn, skipped
		}
		if err != nil {
			return fmt.Errorf("audit log: read %s: %w", name, err)
		}
		if err := fn(line[:len(line)-1]); err != nil {
			return fmt.Errorf("audit log %s line %d: %w", name, lineNo, err)
		}
	}
}
