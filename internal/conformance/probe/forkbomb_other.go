//go:build unix && !linux

package main

import (
	"os"
	"time"
)

// forkCap is the most children fork-bomb holds at once: where no limit
// stops it, it stops there, so that a sandbox without limits.pids cannot
// take the host down. Lower than Linux's: each child here is a whole probe.
var forkCap = 256

// forkBomb starts copies of the probe as fast as it can for SECONDS, each
// holding (as hold does, its output on /dev/null), and keeps them all.
// Without a raw fork to Go programs here, each child is an exec of the
// probe. Then it kills and reaps every child and reports.
func forkBomb(args []string) Result {
	d, err := forkSeconds(args[0])
	if err != nil {
		return Result{Errno: "EINVAL", Detail: err.Error()}
	}
	self, err := os.Executable()
	if err != nil {
		return outcome(err, nil)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return outcome(err, nil)
	}
	defer null.Close()
	var procs []*os.Process
	var first error
	forks, failures, capped := 0, 0, false
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		if len(procs) >= forkCap {
			capped = true
			break
		}
		forks++
		p, err := os.StartProcess(self, []string{self, "hold", "fork-bomb-child"}, &os.ProcAttr{Files: []*os.File{null, null, null}})
		if err != nil {
			failures++
			if first == nil {
				first = err
			}
			time.Sleep(time.Millisecond)
			continue
		}
		procs = append(procs, p)
	}
	for _, p := range procs {
		_ = p.Kill()
	}
	for _, p := range procs {
		_, _ = p.Wait()
	}
	return forkReport(len(procs), forks, failures, first, capped)
}
