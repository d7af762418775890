//go:build linux

package main

import (
	"os"
	"strings"
	"testing"
)

// The accounted figure is PSS plus the kernel's unreclaimable memory plus
// tmpfs and shared memory: reclaimable slab is listed but not counted,
// thread stacks, which vmalloc holds and KernelStack counts, are counted
// once, and so are shared memory pages, which Shmem counts and PSS leaves
// out.
func TestAccountCountsEachPieceOnce(t *testing.T) {
	before := memSample{
		avail:   100 << 20,
		meminfo: map[string]int64{"SUnreclaim": 1000, "KernelStack": 100, "PageTables": 10, "Percpu": 1, "VmallocUsed": 5000, "SReclaimable": 7, "Shmem": 4096},
		slabs:   map[string]slabUse{"mnt_cache": {active: 10, bytes: 4096}},
		vmalloc: map[string]int64{"kernel_clone": 4096, "bpf_prog_alloc_no_stats": 0},
	}
	after := memSample{
		avail:   90 << 20,
		meminfo: map[string]int64{"SUnreclaim": 3000, "KernelStack": 16484, "PageTables": 410, "Percpu": 2, "VmallocUsed": 25480, "SReclaimable": 99999, "Shmem": 3 * 4096},
		slabs:   map[string]slabUse{"mnt_cache": {active: 30, bytes: 3 * 4096}, "net_namespace": {active: 2, bytes: 8192}},
		vmalloc: map[string]int64{"kernel_clone": 4096 + 16384, "bpf_prog_alloc_no_stats": 4096},
	}
	a := account(2, before, after, 1000, 200)
	// 2000 SUnreclaim + 16384 KernelStack + 400 PageTables + 1 Percpu +
	// 4096 vmalloc that is not a stack.
	if got, want := a.kernelBytes(), int64(2000+16384+400+1+4096); got != want {
		t.Errorf("kernelBytes = %d, want %d", got, want)
	}
	// And 8192 of tmpfs pages.
	if got, want := a.perSession()*mib, float64(1000+200+2000+16384+400+1+4096+8192)/2; got != want {
		t.Errorf("perSession = %v bytes, want %v", got, want)
	}
	if got, want := a.availPerSession(), 5.0; got != want {
		t.Errorf("availPerSession = %v MiB, want %v", got, want)
	}
	if len(a.slabs) != 2 || a.slabs[0].name != "mnt_cache" || a.slabs[0].bytes != 8192 || a.slabs[0].active != 20 {
		t.Errorf("slab deltas = %+v, want mnt_cache first with 8192 bytes and 20 objects", a.slabs)
	}
	if top := a.topDeltas(a.slabs, 1); top != "mnt_cache 4.0 (10.0 objects)" {
		t.Errorf("topDeltas = %q", top)
	}

	// Without the callers, stacks come out of VmallocUsed by KernelStack.
	before.vmalloc, after.vmalloc = nil, nil
	a = account(2, before, after, 0, 0)
	if got, want := a.vmallocOther, int64(20480-16384); got != want {
		t.Errorf("vmallocOther without vmallocinfo = %d, want %d", got, want)
	}
	if !strings.Contains(a.breakdown(), "vmalloc by caller unknown") {
		t.Errorf("breakdown does not say vmalloc callers were unknown: %s", a.breakdown())
	}
}

// A process's PSS leaves its share of shared memory out, which the growth
// of Shmem counts.
func TestPSSLeavesSharedMemoryOut(t *testing.T) {
	rollup := "00400000-7ffd3bcee000 ---p 00000000 00:00 0 [rollup]\nRss: 1500 kB\nPss: 132 kB\n" +
		"Pss_Dirty: 100 kB\nPss_Anon: 100 kB\nPss_File: 20 kB\nPss_Shmem: 12 kB\nShared_Clean: 1368 kB\n"
	if got, want := smapsPSS(rollup), int64(120<<10); got != want {
		t.Errorf("smapsPSS = %d, want %d", got, want)
	}
}

// The host's own files parse: /proc/meminfo always, /proc/slabinfo and
// /proc/vmallocinfo where this user may read them.
func TestHostMemoryFilesParse(t *testing.T) {
	s, err := sampleMemory()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kernelFields {
		if _, ok := s.meminfo[k]; !ok && k != "Percpu" {
			t.Errorf("/proc/meminfo: no %s", k)
		}
	}
	if s.avail <= 0 {
		t.Errorf("MemAvailable = %d", s.avail)
	}
	if _, err := os.ReadFile("/proc/slabinfo"); err == nil {
		if s.slabErr != nil || len(s.slabs) == 0 {
			t.Errorf("/proc/slabinfo is readable but gave %d caches: %v", len(s.slabs), s.slabErr)
		}
		var total int64
		for _, u := range s.slabs {
			total += u.bytes
		}
		if slab := s.meminfo["Slab"]; total < slab/2 || total > slab*2 {
			t.Errorf("slab caches add up to %d bytes, /proc/meminfo Slab is %d", total, slab)
		}
	}
	if _, err := os.ReadFile("/proc/vmallocinfo"); err == nil && s.vmallErr != nil {
		t.Errorf("/proc/vmallocinfo is readable but: %v", s.vmallErr)
	}
	pss, threads := pssOf([]int{os.Getpid()})
	if pss <= 0 || threads <= 0 {
		t.Errorf("pssOf(self) = %d bytes, %d threads", pss, threads)
	}
}

// The network-namespace comparison runs the same bwrap command line with
// only the network namespace left out.
func TestWithShareNetChangesOnlyTheNetwork(t *testing.T) {
	argv := []string{"bwrap", "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "sleep", "1"}
	got := strings.Join(withShareNet(argv), " ")
	if want := "bwrap --ro-bind / / --unshare-all --share-net --die-with-parent sleep 1"; got != want {
		t.Errorf("withShareNet = %q, want %q", got, want)
	}
	if strings.Join(argv, " ") != "bwrap --ro-bind / / --unshare-all --die-with-parent sleep 1" {
		t.Errorf("withShareNet changed its argument: %q", argv)
	}
}

// Mounts are counted by their mountinfo lines; the host's own namespaces
// are readable.
func TestHostMounts(t *testing.T) {
	data := []byte("25 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n" +
		"4107 25 0:22 / /proc rw - proc proc rw\n" +
		"30 25 0:5 / /dev rw - devtmpfs udev rw\n")
	if n := countMounts(data); n != 3 {
		t.Errorf("countMounts = %d, want 3", n)
	}
	n, err := hostMounts()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("hostMounts = 0, want this process's own mounts at least")
	}
}
