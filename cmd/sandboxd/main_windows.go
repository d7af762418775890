package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/svc"
	"golang.org/x/sys/windows/svc/eventlog"
	"golang.org/x/sys/windows/svc/mgr"

	launcherwindows "github.com/sandboxd/sandboxd/launcher_windows"
)

// serviceName names the Windows service and its event log source.
const serviceName = "sandboxd"

// stopHint is how long the service manager is told a stop may take: the
// daemon kills every sandbox and waits at most about 15s (shutdownWait and
// stopWait in package daemon) for sessions and clients to let go.
const stopHint = 20 * time.Second

// runInitIfRequested has nothing to do: the Windows backend starts the
// sandboxed command itself, with no init of the daemon's in between.
func runInitIfRequested() {}

var commands = map[string]command{"install": install, "uninstall": uninstall}

// install provisions the host (launcherwindows.Install: the sandbox users
// and their firewall filters) and registers the service that runs this
// binary with the flags given before "install", as LocalSystem, started at
// boot and restarted when it fails. It does not start it. Run again, it
// brings an installed service up to date with this binary and these flags.
func install(flags []string, stateDir string, stdout, stderr io.Writer) int {
	if err := installService(flags, stateDir); err != nil {
		fmt.Fprintf(stderr, "sandboxd install: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "sandboxd: installed the %s service, state in %s; start it with: sc.exe start %s\n", serviceName, stateDir, serviceName)
	return 0
}

func installService(flags []string, stateDir string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("path of this binary: %w", err)
	}
	if err := launcherwindows.Install(stateDir); err != nil {
		return fmt.Errorf("provision the host: %w", err)
	}
	// Named explicitly, so the service uses the state directory install
	// provisioned even when this shell's environment chose it.
	args := append([]string{"--state-dir", stateDir}, flags...)
	cfg := mgr.Config{
		ServiceType:  windows.SERVICE_WIN32_OWN_PROCESS,
		StartType:    mgr.StartAutomatic,
		ErrorControl: mgr.ErrorNormal,
		DisplayName:  "sandboxd",
		Description:  "Runs commands in sandboxes that enforce each request's policy: restricted tokens of dedicated users, NTFS ACLs, firewall filters, job objects.",
		// The backend checks its firewall filters through the Base
		// Filtering Engine.
		Dependencies:     []string{"BFE"},
		ServiceStartName: "LocalSystem",
	}
	m, err := mgr.Connect()
	if err != nil {
		return fmt.Errorf("service control manager (run elevated): %w", err)
	}
	defer m.Disconnect()
	s, err := m.OpenService(serviceName)
	switch {
	case errors.Is(err, windows.ERROR_SERVICE_DOES_NOT_EXIST):
		if s, err = m.CreateService(serviceName, exe, cfg, args...); err != nil {
			return fmt.Errorf("create service %s: %w", serviceName, err)
		}
	case err != nil:
		return fmt.Errorf("open service %s: %w", serviceName, err)
	default:
		cfg.BinaryPathName = commandLine(exe, args)
		if err := s.UpdateConfig(cfg); err != nil {
			s.Close()
			return fmt.Errorf("update service %s: %w", serviceName, err)
		}
	}
	defer s.Close()
	restart := []mgr.RecoveryAction{
		{Type: mgr.ServiceRestart, Delay: 5 * time.Second},
		{Type: mgr.ServiceRestart, Delay: 30 * time.Second},
		{Type: mgr.ServiceRestart, Delay: 2 * time.Minute},
	}
	if err := s.SetRecoveryActions(restart, uint32((24 * time.Hour).Seconds())); err != nil {
		return fmt.Errorf("service %s: recovery actions: %w", serviceName, err)
	}
	// The daemon reports a failure as a non-zero exit code rather than
	// by crashing, and that must restart it too.
	if err := s.SetRecoveryActionsOnNonCrashFailures(true); err != nil {
		return fmt.Errorf("service %s: recovery on failure exit: %w", serviceName, err)
	}
	// Registering refuses a source that exists; removing it first lets
	// install run again.
	if err := eventlog.Remove(serviceName); err != nil && !errors.Is(err, windows.ERROR_FILE_NOT_FOUND) {
		return fmt.Errorf("event log source %s: %w", serviceName, err)
	}
	if err := eventlog.InstallAsEventCreate(serviceName, eventlog.Error|eventlog.Warning|eventlog.Info); err != nil {
		return fmt.Errorf("event log source %s: %w", serviceName, err)
	}
	return nil
}

// commandLine is the service's command line, quoted as CreateService
// quotes it.
func commandLine(exe string, args []string) string {
	parts := []string{syscall.EscapeArg(exe)}
	for _, a := range args {
		parts = append(parts, syscall.EscapeArg(a))
	}
	return strings.Join(parts, " ")
}

// uninstall stops and removes the service, then undoes what install
// provisioned (launcherwindows.Uninstall). Each step that has nothing left
// to undo is skipped, so it also cleans up after an install that failed
// halfway.
func uninstall(_ []string, stateDir string, stdout, stderr io.Writer) int {
	if err := uninstallService(stateDir); err != nil {
		fmt.Fprintf(stderr, "sandboxd uninstall: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "sandboxd: removed the %s service and what it provisioned; its state directory %s keeps the audit log\n", serviceName, stateDir)
	return 0
}

func uninstallService(stateDir string) error {
	m, err := mgr.Connect()
	if err != nil {
		return fmt.Errorf("service control manager (run elevated): %w", err)
	}
	defer m.Disconnect()
	s, err := m.OpenService(serviceName)
	switch {
	case errors.Is(err, windows.ERROR_SERVICE_DOES_NOT_EXIST):
	case err != nil:
		return fmt.Errorf("open service %s: %w", serviceName, err)
	default:
		err := removeService(s)
		s.Close()
		if err != nil {
			return err
		}
	}
	if err := eventlog.Remove(serviceName); err != nil && !errors.Is(err, windows.ERROR_FILE_NOT_FOUND) {
		return fmt.Errorf("event log source %s: %w", serviceName, err)
	}
	// Last: the daemon must have stopped, and its sandboxes with it,
	// before the users they run as and their filters go.
	if err := launcherwindows.Uninstall(stateDir); err != nil {
		return fmt.Errorf("undo the host's provisioning: %w", err)
	}
	return nil
}

// removeService stops s, waits until it has stopped, and deletes it.
func removeService(s *mgr.Service) error {
	if _, err := s.Control(svc.Stop); err != nil && !errors.Is(err, windows.ERROR_SERVICE_NOT_ACTIVE) {
		return fmt.Errorf("stop service %s: %w", serviceName, err)
	}
	deadline := time.Now().Add(2 * stopHint)
	for {
		st, err := s.Query()
		if err != nil {
			return fmt.Errorf("service %s: status: %w", serviceName, err)
		}
		if st.State == svc.Stopped {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("service %s did not stop within %v", serviceName, 2*stopHint)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err := s.Delete(); err != nil && !errors.Is(err, windows.ERROR_SERVICE_MARKED_FOR_DELETE) {
		return fmt.Errorf("delete service %s: %w", serviceName, err)
	}
	return nil
}

// runService runs the daemon under the service control manager when that
// is what started this process, its log going to the Application event
// log, and says whether it did.
func runService(args []string) (code int, ok bool) {
	isService, err := svc.IsWindowsService()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandboxd: cannot tell whether the service control manager started this process: %v\n", err)
		return 1, true
	}
	if !isService {
		return 0, false
	}
	elog, err := eventlog.Open(serviceName)
	if err != nil {
		// Nowhere to say why; the service control manager records the
		// exit code.
		return 1, true
	}
	defer elog.Close()
	h := &service{args: args, log: eventWriter{elog}}
	if err := svc.Run(serviceName, h); err != nil {
		elog.Error(1, fmt.Sprintf("run as the %s service: %v", serviceName, err))
		return 1, true
	}
	return h.code, true
}

// service is the daemon as the service control manager drives it.
type service struct {
	args []string
	log  io.Writer
	code int
}

// Execute runs the daemon until it stops on its own or the service
// control manager asks it to stop, which it then does as for SIGTERM:
// every sandbox is killed and every session reports its end first.
func (s *service) Execute(_ []string, requests <-chan svc.ChangeRequest, status chan<- svc.Status) (serviceSpecific bool, exitCode uint32) {
	status <- svc.Status{State: svc.StartPending}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- run(ctx, s.args, io.Discard, s.log) }()
	status <- svc.Status{State: svc.Running, Accepts: svc.AcceptStop | svc.AcceptShutdown}
	for {
		select {
		case s.code = <-done:
			// A non-zero code is the daemon's own, not a Win32 error.
			return s.code != 0, uint32(s.code)
		case r := <-requests:
			switch r.Cmd {
			case svc.Interrogate:
				status <- r.CurrentStatus
			case svc.Stop, svc.Shutdown:
				status <- svc.Status{State: svc.StopPending, WaitHint: uint32(stopHint.Milliseconds())}
				cancel()
			}
		}
	}
}

// eventWriter puts each log line in the event log as an information event.
type eventWriter struct{ log *eventlog.Log }

func (w eventWriter) Write(p []byte) (int, error) {
	if err := w.log.Info(1, strings.TrimSuffix(string(p), "\n")); err != nil {
		return 0, fmt.Errorf("event log: %w", err)
	}
	return len(p), nil
}

// keepSysmonAwake is Linux's (see sysmon_linux.go).
func keepSysmonAwake() {}
