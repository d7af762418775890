package main

import launcherdarwin "github.com/sandboxd/sandboxd/launcher_darwin"

// runInitIfRequested runs the daemon's binary as a session's guard when
// the backend started it as one (sandbox-exec applies the profile and
// executes the command itself, so there is no init on macOS).
func runInitIfRequested() { launcherdarwin.RunGuardIfRequested() }

// keepSysmonAwake is Linux's (see sysmon_linux.go).
func keepSysmonAwake() {}
