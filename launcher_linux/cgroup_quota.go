package launcherlinux

// CPUQuota is the CFS quota and period, in microseconds, that enforce
// millis thousandths of a CPU: what sandboxd writes, for those who hand
// the limit to another runtime.
func CPUQuota(millis uint32) (quota, period uint64) { return cpuQuota(millis) }
