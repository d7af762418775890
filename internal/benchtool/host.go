//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// durations is a series of samples.
type durations []time.Duration

// percentile is the nearest-rank percentile p (0..100).
func (d durations) percentile(p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func (d durations) mean() time.Duration {
	if len(d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, v := range d {
		sum += v
	}
	return sum / time.Duration(len(d))
}

const mib = 1 << 20

// memAvailable is /proc/meminfo's MemAvailable in bytes: what the kernel
// thinks can still be handed out without swapping, which is what a host
// running many idle sessions runs out of.
func memAvailable() (int64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/meminfo MemAvailable %q: %w", rest, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/meminfo has no MemAvailable")
}

// settledMemAvailable waits out the kernel's lazy accounting (freed pages
// returning, slab shrinking): it samples every 500 ms until two samples in
// a row differ by less than 1 MiB, at most 20 times, and returns the last.
func settledMemAvailable(ctx context.Context) (int64, error) {
	prev, err := memAvailable()
	if err != nil {
		return 0, err
	}
	for range 20 {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		cur, err := memAvailable()
		if err != nil {
			return 0, err
		}
		if d := cur - prev; d < mib && d > -mib {
			return cur, nil
		}
		prev = cur
	}
	return prev, nil
}

func readInt(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// tasksInUse is the number of threads on the host (the denominator of
// /proc/loadavg's fourth field): each one holds a pid, so this is what
// kernel.pid_max limits.
func tasksInUse() (int64, error) {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(data))
	if len(fields) < 4 {
		return 0, fmt.Errorf("/proc/loadavg: %q", data)
	}
	_, total, ok := strings.Cut(fields[3], "/")
	if !ok {
		return 0, fmt.Errorf("/proc/loadavg: %q", data)
	}
	return strconv.ParseInt(total, 10, 64)
}

// guard is the safety stop of every ramp: it says why starting one more
// session or process would be unwise, or "" when it is fine.
type guard struct {
	minAvail int64
	maxTasks int64
}

func newGuard(cfg *config) guard {
	g := guard{minAvail: cfg.minAvailMiB * mib}
	if pidMax, err := readInt("/proc/sys/kernel/pid_max"); err == nil {
		g.maxTasks = pidMax - int64(cfg.pidReserve)
	}
	return g
}

func (g guard) check() string {
	if avail, err := memAvailable(); err == nil && avail < g.minAvail {
		return fmt.Sprintf("safety stop: MemAvailable %d MiB < --min-available-mib %d", avail/mib, g.minAvail/mib)
	}
	if tasks, err := tasksInUse(); err == nil && g.maxTasks > 0 && tasks >= g.maxTasks {
		return fmt.Sprintf("safety stop: %d tasks in use >= kernel.pid_max minus --pid-reserve (%d)", tasks, g.maxTasks)
	}
	return ""
}

// children lists the child pids of every thread of pid.
func children(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for f := range strings.FieldsSeq(string(data)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// tree is pid and its descendants.
func tree(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children(out[i])...)
	}
	return out
}

// procStatus returns the named fields of /proc/pid/status.
func procStatus(pid int, names ...string) map[string]string {
	out := map[string]string{}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && slices.Contains(names, k) {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

func comm(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return string(bytes.TrimSpace(data))
}

// treeFootprint sums threads, RSS and PSS over pid's tree and names its
// processes, to say what one session costs the host. PSS splits shared
// pages among their users, so unlike MemAvailable it does not move with
// whatever else the host is doing; it misses kernel memory (page tables,
// namespaces, stacks) and the daemon's share.
func treeFootprint(pid int) (procs, threads int, rssKiB, pssKiB int64, names []string) {
	kib := func(v string) int64 {
		n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, " kB")), 10, 64)
		return n
	}
	for _, p := range tree(pid) {
		st := procStatus(p, "Threads", "VmRSS")
		n, err := strconv.Atoi(st["Threads"])
		if err != nil {
			continue
		}
		procs++
		threads += n
		rssKiB += kib(st["VmRSS"])
		if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", p)); err == nil {
			for line := range strings.SplitSeq(string(data), "\n") {
				if v, ok := strings.CutPrefix(line, "Pss:"); ok {
					pssKiB += kib(v)
				}
			}
		}
		names = append(names, comm(p))
	}
	return procs, threads, rssKiB, pssKiB, names
}

// treeTasks is the number of threads in pid's tree, each one a task that
// holds a pid.
func treeTasks(pid int) int {
	var n int
	for _, p := range tree(pid) {
		if t, err := strconv.Atoi(procStatus(p, "Threads")["Threads"]); err == nil {
			n += t
		}
	}
	return n
}

// hasDescendantNamed says whether a process called name runs under pid:
// how the bwrap counterparts know their sandbox has got as far as exec.
func hasDescendantNamed(pid int, name string) bool {
	for _, p := range tree(pid)[1:] {
		if comm(p) == name {
			return true
		}
	}
	return false
}

// fdCount is the number of open descriptors of pid.
func fdCount(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// limitLine is pid's line for limit (e.g. "Max open files") in
// /proc/pid/limits.
func limitLine(pid int, limit string) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(line, limit) {
			return strings.Join(strings.Fields(strings.TrimPrefix(line, limit)), " ")
		}
	}
	return "unknown"
}
