package main

import launcherlinux "github.com/sandboxd/sandboxd/launcher_linux"

func runInitIfRequested() {
	launcherlinux.RunProbeIfRequested()
}
