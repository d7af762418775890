package launcherlinux

import (
	"reflect"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestParseCgroupMountsAndMembership(t *testing.T) {
	hybrid := `25 20 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
27 25 0:24 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
28 25 0:25 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
29 25 0:26 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
30 25 0:27 / /sys/fs/cgroup/my\040dir rw - cgroup cgroup rw,name=systemd
`
	v1, v2 := parseCgroupMounts([]byte(hybrid))
	want := map[string]string{ctlCPU: "/sys/fs/cgroup/cpu,cpuacct", ctlMemory: "/sys/fs/cgroup/memory", ctlPids: "/sys/fs/cgroup/pids"}
	if !reflect.DeepEqual(v1, want) || v2 != "/sys/fs/cgroup/unified" {
		t.Errorf("v1 %v v2 %q", v1, v2)
	}
	v1, v2 = parseCgroupMounts([]byte("30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n"))
	if len(v1) != 0 || v2 != "/sys/fs/cgroup" {
		t.Errorf("unified only: v1 %v v2 %q", v1, v2)
	}
	if got := unescapeMount(`/a\040b\134c`); got != `/a b\c` {
		t.Errorf("unescape: %q", got)
	}
	member := parseCgroupMembership([]byte("4:memory:/process_api/x\n2:cpu,cpuacct:/\n1:name=systemd:/\n0::/user.slice\n"))
	if member[ctlMemory] != "/process_api/x" || member[ctlCPU] != "/" || member[""] != "/user.slice" {
		t.Errorf("membership %v", member)
	}
}

func TestCgroupSettings(t *testing.T) {
	l := &sandboxdv1.Limits{MemoryBytes: 64 << 20, Pids: 64, CpuMillis: 500}
	v2 := cgroupSettings(l, map[string]bool{ctlMemory: true, ctlPids: true, ctlCPU: true})
	want2 := []cgroupSetting{
		{ctlMemory, "memory.max", "67108864", false},
		{ctlMemory, "memory.swap.max", "0", true},
		{ctlMemory, "memory.oom.group", "1", false},
		{ctlPids, "pids.max", "64", false},
		{ctlCPU, "cpu.max", "50000 100000", false},
	}
	if !reflect.DeepEqual(v2, want2) {
		t.Errorf("v2: %v", v2)
	}
	v1 := cgroupSettings(l, nil)
	want1 := []cgroupSetting{
		{ctlMemory, "memory.limit_in_bytes", "67108864", false},
		{ctlMemory, "memory.memsw.limit_in_bytes", "67108864", true},
		{ctlPids, "pids.max", "64", false},
		{ctlCPU, "cpu.cfs_period_us", "100000", false},
		{ctlCPU, "cpu.cfs_quota_us", "50000", false},
	}
	if !reflect.DeepEqual(v1, want1) {
		t.Errorf("v1: %v", v1)
	}
}

// Below the kernel's least quota of 1 ms the period grows: rounding the
// quota up would grant more CPU than asked.
func TestCPUQuotaNeverGrantsMore(t *testing.T) {
	for _, m := range []uint32{1, 5, 9, 10, 250, 1000, 4000} {
		q, p := cpuQuota(m)
		if q < 1000 {
			t.Errorf("%d: quota %dus is below the kernel's least", m, q)
		}
		if q*1000 != uint64(m)*p {
			t.Errorf("%d: %d/%d is not %d thousandths", m, q, p, m)
		}
	}
}
