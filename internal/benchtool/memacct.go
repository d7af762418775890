//go:build linux

package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The memory figure accounts for what idle sandboxes cost piece by piece,
// because MemAvailable, which it keeps as a cross-check, moves with
// whatever else the host does (a build filling the page cache moves it by
// more than a thousand sandboxes). The pieces:
//   - user memory: the PSS of the sandboxes' processes and of what grew in
//     the daemon's tree, read from each process, which no other load moves;
//   - kernel memory that is not reclaimable and that processes and
//     namespaces hold: unreclaimable slab, kernel stacks, page tables,
//     per-CPU allocations and vmalloc (seccomp programs are vmalloc'd), as
//     deltas of the host's counters across starting the sandboxes. These
//     move with other load far less than MemAvailable does, and the per
//     cache and per caller deltas say which kernel objects they are;
//   - the pages of tmpfs files and shared memory (Shmem), which no swap
//     here reclaims and which a process maps, if at all, only in part: a
//     sandbox's /etc/passwd is a tmpfs file no process has mapped. They
//     are counted here, as the growth of Shmem, and left out of the PSS.
// Reclaimable slab (dentries and inodes of /proc, mostly) is listed but
// not counted: the kernel frees it under pressure, as MemAvailable assumes.

// kernelFields are the /proc/meminfo counters the accounting takes deltas
// of, in the order they print; all but SReclaimable are counted, Shmem
// apart from the kernel's.
var kernelFields = []string{"SUnreclaim", "KernelStack", "PageTables", "Percpu", "VmallocUsed", "SReclaimable", "Shmem"}

// memSample is one reading of the host's memory counters.
type memSample struct {
	avail   int64
	meminfo map[string]int64 // bytes, kernelFields
	// slabs is /proc/slabinfo by cache, nil when it cannot be read.
	slabs    map[string]slabUse
	slabErr  error
	vmalloc  map[string]int64 // bytes of vmalloc'd pages by caller, nil when /proc/vmallocinfo cannot be read
	vmallErr error
}

// slabUse is what one slab cache holds: objects in use and the memory of
// its slabs (what /proc/meminfo's Slab adds up).
type slabUse struct{ active, bytes int64 }

func sampleMemory() (memSample, error) {
	var s memSample
	var err error
	if s.meminfo, err = readMeminfo(); err != nil {
		return s, err
	}
	s.avail = s.meminfo["MemAvailable"]
	s.slabs, s.slabErr = readSlabinfo()
	s.vmalloc, s.vmallErr = readVmallocinfo()
	return s, nil
}

// readMeminfo returns /proc/meminfo in bytes.
func readMeminfo() (map[string]int64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for line := range strings.SplitSeq(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && f[1] == "kB" {
			n <<= 10
		}
		out[k] = n
	}
	if _, ok := out["MemAvailable"]; !ok {
		return nil, fmt.Errorf("/proc/meminfo has no MemAvailable")
	}
	return out, nil
}

// readSlabinfo parses /proc/slabinfo (version 2.1, root only):
// name active_objs num_objs objsize objperslab pagesperslab : tunables ...
// : slabdata active_slabs num_slabs sharedavail.
func readSlabinfo() (map[string]slabUse, error) {
	f, err := os.Open("/proc/slabinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	page := int64(os.Getpagesize())
	out := map[string]slabUse{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "slabinfo") || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		i := slices.Index(fields, "slabdata")
		if len(fields) < 6 || i < 0 || i+2 >= len(fields) {
			return nil, fmt.Errorf("/proc/slabinfo: unexpected line %q", line)
		}
		active, err1 := strconv.ParseInt(fields[1], 10, 64)
		perSlab, err2 := strconv.ParseInt(fields[5], 10, 64)
		slabs, err3 := strconv.ParseInt(fields[i+2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("/proc/slabinfo: unexpected line %q", line)
		}
		u := out[fields[0]]
		u.active += active
		u.bytes += slabs * perSlab * page
		out[fields[0]] = u
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("/proc/slabinfo: %w", err)
	}
	return out, nil
}

// readVmallocinfo sums the pages of /proc/vmallocinfo (root only) by the
// function that allocated them: "ADDR-ADDR SIZE caller+0x../0x.. pages=N ...".
func readVmallocinfo() (map[string]int64, error) {
	f, err := os.Open("/proc/vmallocinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	page := int64(os.Getpagesize())
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 {
			continue
		}
		caller, _, _ := strings.Cut(fields[2], "+")
		for _, f := range fields[3:] {
			if v, ok := strings.CutPrefix(f, "pages="); ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					out[caller] += n * page
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("/proc/vmallocinfo: %w", err)
	}
	return out, nil
}

// stackCallers are the vmalloc callers of thread stacks, which KernelStack
// counts already (CONFIG_VMAP_STACK); inlining decides which one shows.
var stackCallers = []string{"kernel_clone", "copy_process", "dup_task_struct", "alloc_thread_stack_node"}

// memAccount is what n idle sandboxes of one side cost, as totals.
type memAccount struct {
	n int
	// availDrop is how far MemAvailable fell: the cross-check.
	availDrop int64
	// pssOwn is the PSS of the sandboxes' own processes; pssRest what the
	// PSS of the rest of the daemon's tree (the daemon, its spawner, the
	// inits it keeps started ahead) grew by, 0 for bwrap.
	pssOwn, pssRest int64
	kernel          map[string]int64 // deltas of kernelFields
	// vmallocOther is the vmalloc delta without thread stacks.
	vmallocOther int64
	slabs        []cacheDelta
	vmalloc      []cacheDelta
	// notes say what could not be read.
	notes []string
}

// cacheDelta is the growth of one slab cache or vmalloc caller.
type cacheDelta struct {
	name          string
	bytes, active int64
}

func account(n int, before, after memSample, pssOwn, pssRest int64) memAccount {
	a := memAccount{n: n, availDrop: before.avail - after.avail, pssOwn: pssOwn, pssRest: pssRest, kernel: map[string]int64{}}
	for _, k := range kernelFields {
		a.kernel[k] = after.meminfo[k] - before.meminfo[k]
	}
	switch {
	case before.slabs != nil && after.slabs != nil:
		for name, u := range after.slabs {
			b := before.slabs[name]
			a.slabs = append(a.slabs, cacheDelta{name, u.bytes - b.bytes, u.active - b.active})
		}
		sortDeltas(a.slabs)
	default:
		a.notes = append(a.notes, fmt.Sprintf("no slab caches: %v", cmp.Or(after.slabErr, before.slabErr)))
	}
	switch {
	case before.vmalloc != nil && after.vmalloc != nil:
		for name, v := range after.vmalloc {
			d := v - before.vmalloc[name]
			if slices.Contains(stackCallers, name) {
				continue
			}
			a.vmallocOther += d
			a.vmalloc = append(a.vmalloc, cacheDelta{name: name, bytes: d})
		}
		sortDeltas(a.vmalloc)
	default:
		// Without the callers, thread stacks are taken out of the total
		// as KernelStack counts them.
		a.vmallocOther = a.kernel["VmallocUsed"] - a.kernel["KernelStack"]
		a.notes = append(a.notes, fmt.Sprintf("vmalloc by caller unknown (%v): counted as VmallocUsed minus KernelStack", cmp.Or(after.vmallErr, before.vmallErr)))
	}
	return a
}

// sortDeltas puts the largest growth first, by name for equal ones so
// that the report is stable.
func sortDeltas(d []cacheDelta) {
	slices.SortFunc(d, func(x, y cacheDelta) int {
		return cmp.Or(cmp.Compare(y.bytes, x.bytes), strings.Compare(x.name, y.name))
	})
}

// kernelBytes is the kernel memory counted for the sandboxes.
func (a memAccount) kernelBytes() int64 {
	return a.kernel["SUnreclaim"] + a.kernel["KernelStack"] + a.kernel["PageTables"] + a.kernel["Percpu"] + a.vmallocOther
}

func (a memAccount) per(v int64) float64 {
	if a.n == 0 {
		return 0
	}
	return float64(v) / float64(a.n)
}

// total is the accounted memory of the sandboxes: their processes', the
// kernel's and their tmpfs and shared memory pages.
func (a memAccount) total() int64 {
	return a.pssOwn + a.pssRest + a.kernelBytes() + a.kernel["Shmem"]
}

// perSession is the accounted memory of one sandbox in MiB.
func (a memAccount) perSession() float64 { return a.per(a.total()) / mib }

// availPerSession is the MemAvailable drop per sandbox in MiB.
func (a memAccount) availPerSession() float64 { return a.per(a.availDrop) / mib }

// breakdown says per sandbox where its accounted memory is, in KiB.
func (a memAccount) breakdown() string {
	k := func(v int64) string { return fmt.Sprintf("%.1f", a.per(v)/1024) }
	s := fmt.Sprintf("%s KiB per sandbox = processes %s (PSS of the sandboxes' own %s, growth of the daemon's tree %s, shared memory left out) + kernel %s (SUnreclaim %s, KernelStack %s, PageTables %s, Percpu %s, vmalloc without stacks %s) + tmpfs and shared memory %s (Shmem); not counted: SReclaimable %s",
		k(a.total()), k(a.pssOwn+a.pssRest), k(a.pssOwn), k(a.pssRest), k(a.kernelBytes()),
		k(a.kernel["SUnreclaim"]), k(a.kernel["KernelStack"]), k(a.kernel["PageTables"]), k(a.kernel["Percpu"]), k(a.vmallocOther),
		k(a.kernel["Shmem"]), k(a.kernel["SReclaimable"]))
	for _, n := range a.notes {
		s += "; " + n
	}
	return s
}

// topDeltas lists the largest growths per sandbox, at most max of them and
// none below 0.5 KiB, objects with them when known.
func (a memAccount) topDeltas(d []cacheDelta, max int) string {
	var parts []string
	for _, c := range d {
		if len(parts) == max || a.per(c.bytes) < 512 {
			break
		}
		p := fmt.Sprintf("%s %.1f", c.name, a.per(c.bytes)/1024)
		if c.active != 0 {
			p += fmt.Sprintf(" (%.1f objects)", a.per(c.active))
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "none above 0.5 KiB"
	}
	return strings.Join(parts, ", ")
}

// pssOf is the PSS of pids in bytes, with how many threads they have: what
// the processes take of user memory, with shared pages split among their
// users, which other load on the host does not move. Their share of
// shared memory (Pss_Shmem) is left out: the growth of Shmem counts it
// whole.
func pssOf(pids []int) (pss int64, threads int) {
	for _, p := range pids {
		if t, err := strconv.Atoi(procStatus(p, "Threads")["Threads"]); err == nil {
			threads += t
		} else {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", p))
		if err != nil {
			continue
		}
		pss += smapsPSS(string(data))
	}
	return pss, threads
}

// smapsPSS is the PSS of an smaps_rollup in bytes, without its share of
// shared memory.
func smapsPSS(rollup string) int64 {
	var pss int64
	for line := range strings.SplitSeq(rollup, "\n") {
		field, v, ok := strings.Cut(line, ":")
		if !ok || field != "Pss" && field != "Pss_Shmem" {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if field == "Pss_Shmem" {
			kb = -kb
		}
		pss += kb << 10
	}
	return pss
}

// hostMounts is how many mounts are alive on the host, over every mount
// namespace a process is in. It moves the counterpart's figure: bwrap
// parses /proc/self/mountinfo for every bind it makes into an array
// indexed by mount id, which its pid 1 keeps resident, and mount ids are
// reused lowest first, so each bwrap's PSS grows with the mounts alive on
// the host when it starts (20,000 mounts held in an unrelated namespace
// added 131 KiB to each of 40 bwrap sandboxes; the thousand sandboxes'
// own mounts are part of their cost at that scale). The sessions'
// processes never read mountinfo. One process per namespace is read;
// processes that end meanwhile are skipped: their namespace either ends
// with them or is read through another of its processes.
func hostMounts() (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	mounts := 0
	seen := map[string]bool{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
		if err != nil || seen[ns] {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
		if err != nil {
			continue
		}
		seen[ns] = true
		mounts += countMounts(data)
	}
	if len(seen) == 0 {
		return 0, fmt.Errorf("no /proc/*/mountinfo could be read")
	}
	return mounts, nil
}

// countMounts counts the lines of a mountinfo file, each one a mount that
// starts with its id.
func countMounts(data []byte) int {
	n := 0
	for line := range strings.SplitSeq(string(data), "\n") {
		id, _, ok := strings.Cut(line, " ")
		if _, err := strconv.Atoi(id); ok && err == nil {
			n++
		}
	}
	return n
}

// settledMounts waits until the host's mount count stops falling: the
// namespaces of sandboxes that just ended release their mounts after
// their last process is gone, and the next side must not start above
// mount ids they still hold. It samples every 250 ms, at most 40 times.
func settledMounts(ctx context.Context) (int, error) {
	prev, err := hostMounts()
	if err != nil {
		return prev, err
	}
	for range 40 {
		select {
		case <-ctx.Done():
			return prev, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		cur, err := hostMounts()
		if err != nil {
			return prev, err
		}
		if cur >= prev {
			return cur, nil
		}
		prev = cur
	}
	return prev, nil
}
