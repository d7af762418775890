//go:build !linux && !darwin && !windows

package main

// runInitIfRequested has nothing to do: only the Linux backend re-executes
// the daemon as a sandbox's init.
func runInitIfRequested() {}

// keepSysmonAwake is Linux's (see sysmon_linux.go).
func keepSysmonAwake() {}
