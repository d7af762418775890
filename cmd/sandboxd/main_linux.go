package main

import launcherlinux "github.com/sandboxd/sandboxd/launcher_linux"

func runInitIfRequested() {
	launcherlinux.RunProbeIfRequested()
}

// checkMechanism rejects a --mechanism the backend does not have before
// anything is probed, as a usage error.
func checkMechanism(name string) error {
	_, err := launcherlinux.ParseMechanismSet(name)
	return err
}
