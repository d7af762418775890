package launcherwindows

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// From winnt.h.
const (
	jobObjectCPURateControlEnable  = 0x1
	jobObjectCPURateControlHardCap = 0x4

	jobObjectMsgActiveProcessZero = 4
	jobObjectMsgJobMemoryLimit    = 10
)

// jobCPURateControl is JOBOBJECT_CPU_RATE_CONTROL_INFORMATION with its
// union as CpuRate.
type jobCPURateControl struct {
	ControlFlags uint32
	CPURate      uint32
}

// jobAssociateCompletionPort is JOBOBJECT_ASSOCIATE_COMPLETION_PORT.
type jobAssociateCompletionPort struct {
	CompletionKey  uintptr
	CompletionPort windows.Handle
}

// jobBasicAccounting is JOBOBJECT_BASIC_ACCOUNTING_INFORMATION.
type jobBasicAccounting struct {
	TotalUserTime             int64
	TotalKernelTime           int64
	ThisPeriodTotalUserTime   int64
	ThisPeriodTotalKernelTime int64
	TotalPageFaultCount       uint32
	TotalProcesses            uint32
	ActiveProcesses           uint32
	TotalTerminatedProcesses  uint32
}

// Completion keys: the job's own messages, and the one that tells the
// watcher to stop.
const (
	jobKey  = 1
	stopKey = 2
)

// emptyPoll is how often a job is asked for its process count while its
// end is awaited: the job's messages are notifications whose delivery
// Windows does not guarantee.
const emptyPoll = 100 * time.Millisecond

// job is the job object of one session. Every process of the sandbox is in
// it from its first instruction, and so is everything those start: a job
// without breakaway rights cannot be left.
type job struct {
	h    windows.Handle
	port windows.Handle
	// zero is signalled when the job reports its last process gone.
	zero    chan struct{}
	watched chan struct{}
	once    sync.Once
	// overMemory is set when a commit failed for the job's memory limit,
	// which then ends the session as a cgroup's OOM kill would.
	overMemory atomic.Bool
}

// newJob creates the job with the plan's limits and starts watching it.
func newJob(spec Job) (*job, error) {
	h, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return nil, fmt.Errorf("CreateJobObject: %w", err)
	}
	if err := configureJob(h, spec); err != nil {
		windows.CloseHandle(h)
		return nil, err
	}
	port, err := windows.CreateIoCompletionPort(windows.InvalidHandle, 0, 0, 1)
	if err != nil {
		windows.CloseHandle(h)
		return nil, fmt.Errorf("job completion port: CreateIoCompletionPort: %w", err)
	}
	assoc := jobAssociateCompletionPort{CompletionKey: jobKey, CompletionPort: port}
	if _, err := windows.SetInformationJobObject(h, windows.JobObjectAssociateCompletionPortInformation,
		uintptr(unsafe.Pointer(&assoc)), uint32(unsafe.Sizeof(assoc))); err != nil {
		windows.CloseHandle(port)
		windows.CloseHandle(h)
		return nil, fmt.Errorf("SetInformationJobObject(JobObjectAssociateCompletionPortInformation): %w", err)
	}
	j := &job{h: h, port: port, zero: make(chan struct{}, 1), watched: make(chan struct{})}
	go j.watch()
	return j, nil
}

func configureJob(h windows.Handle, spec Job) error {
	var ext windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	b := &ext.BasicLimitInformation
	if spec.KillOnClose {
		b.LimitFlags |= windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	}
	if spec.DieOnUnhandledException {
		b.LimitFlags |= windows.JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION
	}
	if spec.ActiveProcessLimit > 0 {
		b.LimitFlags |= windows.JOB_OBJECT_LIMIT_ACTIVE_PROCESS
		b.ActiveProcessLimit = spec.ActiveProcessLimit
	}
	if spec.JobMemoryLimit > 0 {
		if uint64(uintptr(spec.JobMemoryLimit)) != spec.JobMemoryLimit {
			return fmt.Errorf("job memory limit %d bytes does not fit this platform's address size", spec.JobMemoryLimit)
		}
		b.LimitFlags |= windows.JOB_OBJECT_LIMIT_JOB_MEMORY
		ext.JobMemoryLimit = uintptr(spec.JobMemoryLimit)
	}
	if _, err := windows.SetInformationJobObject(h, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&ext)), uint32(unsafe.Sizeof(ext))); err != nil {
		return fmt.Errorf("SetInformationJobObject(JobObjectExtendedLimitInformation, flags %#x): %w", b.LimitFlags, err)
	}
	ui := windows.JOBOBJECT_BASIC_UI_RESTRICTIONS{UIRestrictionsClass: spec.UIRestrictions}
	if _, err := windows.SetInformationJobObject(h, windows.JobObjectBasicUIRestrictions,
		uintptr(unsafe.Pointer(&ui)), uint32(unsafe.Sizeof(ui))); err != nil {
		return fmt.Errorf("SetInformationJobObject(JobObjectBasicUIRestrictions, %#x): %w", spec.UIRestrictions, err)
	}
	if spec.CPURate > 0 {
		cpu := jobCPURateControl{ControlFlags: jobObjectCPURateControlEnable | jobObjectCPURateControlHardCap, CPURate: spec.CPURate}
		if _, err := windows.SetInformationJobObject(h, windows.JobObjectCpuRateControlInformation,
			uintptr(unsafe.Pointer(&cpu)), uint32(unsafe.Sizeof(cpu))); err != nil {
			return fmt.Errorf("SetInformationJobObject(JobObjectCpuRateControlInformation, hard cap %d): %w", spec.CPURate, err)
		}
	}
	return nil
}

// watch reads the job's messages until close stops it.
func (j *job) watch() {
	defer close(j.watched)
	for {
		var msg uint32
		var key uintptr
		var ov *windows.Overlapped
		err := windows.GetQueuedCompletionStatus(j.port, &msg, &key, &ov, windows.INFINITE)
		if err != nil || key == stopKey {
			return
		}
		switch msg {
		case jobObjectMsgActiveProcessZero:
			select {
			case j.zero <- struct{}{}:
			default:
			}
		case jobObjectMsgJobMemoryLimit:
			// Windows only fails the commit; the session ends here, so
			// that the limit means what it means on Linux and Wait can
			// name it. A failed terminate leaves the commit refused,
			// which still keeps the job under its limit.
			j.overMemory.Store(true)
			_ = windows.TerminateJobObject(j.h, killedExitCode)
		}
	}
}

// terminate ends every process of the job with exit code code.
func (j *job) terminate(code uint32) error {
	if err := windows.TerminateJobObject(j.h, code); err != nil {
		return fmt.Errorf("TerminateJobObject: %w", err)
	}
	return nil
}

// active is how many processes of the job are still running.
func (j *job) active() (uint32, error) {
	var acct jobBasicAccounting
	if err := windows.QueryInformationJobObject(j.h, windows.JobObjectBasicAccountingInformation,
		uintptr(unsafe.Pointer(&acct)), uint32(unsafe.Sizeof(acct)), nil); err != nil {
		return 0, fmt.Errorf("QueryInformationJobObject(JobObjectBasicAccountingInformation): %w", err)
	}
	return acct.ActiveProcesses, nil
}

// waitEmpty returns once no process of the job is left, or with an error
// after timeout.
func (j *job) waitEmpty(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n, err := j.active()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes of the job survive TerminateJobObject after %v", n, timeout)
		}
		select {
		case <-j.zero:
		case <-time.After(emptyPoll):
		}
	}
}

// close stops the watcher and closes the port and the job; closing the
// job kills whatever is still in it. The watcher is told to stop through
// the port rather than by closing it under its feet, where the handle
// value could already name something else.
func (j *job) close() error {
	var err error
	j.once.Do(func() {
		if perr := windows.PostQueuedCompletionStatus(j.port, 0, stopKey, nil); perr != nil {
			err = fmt.Errorf("stop watching the job: %w", perr)
		} else {
			<-j.watched
		}
		// Without the watcher stopped, the port stays open for it: a
		// leaked handle is better than one closed under a reader.
		if err == nil {
			err = windows.CloseHandle(j.port)
		}
		err = errors.Join(err, windows.CloseHandle(j.h))
	})
	return err
}
