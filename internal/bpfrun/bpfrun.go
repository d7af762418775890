// Package bpfrun runs the classic BPF programs sandboxd builds for seccomp
// the way the kernel does, for tests to check what a program answers
// without loading it. It knows the instructions the programs use: absolute
// word loads, conditional and unconditional jumps, AND with a constant and
// return of a constant.
package bpfrun

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sandboxd/sandboxd/launcher_linux/sandboxinit"
)

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// Data is a struct seccomp_data: the call nr of arch with args.
func Data(arch, nr uint32, args ...uint64) []byte {
	data := make([]byte, offArgs+8*6)
	binary.LittleEndian.PutUint32(data[offNr:], nr)
	binary.LittleEndian.PutUint32(data[offArch:], arch)
	for i, a := range args {
		binary.LittleEndian.PutUint64(data[offArgs+8*i:], a)
	}
	return data
}

// Verdict is what prog returns for data (Data).
func Verdict(prog []sandboxinit.SockFilter, data []byte) (uint32, error) {
	_, verdict, _, err := run(prog, func(k uint32) (uint32, bool) {
		return binary.LittleEndian.Uint32(data[k:]), true
	})
	return verdict, err
}

// Constant runs prog for call nr of arch as the kernel does when it builds
// its action cache: it gives up at the first load of an argument, where
// the verdict would depend on more than the number. steps counts the
// instructions run before the return or the give-up.
func Constant(prog []sandboxinit.SockFilter, arch, nr uint32) (steps int, verdict uint32, constant bool, err error) {
	return run(prog, func(k uint32) (uint32, bool) {
		switch k {
		case offNr:
			return nr, true
		case offArch:
			return arch, true
		}
		return 0, false
	})
}

// Classic BPF opcodes.
const (
	ldAbsW = 0x20
	ja     = 0x05
	jeqK   = 0x15
	jgeK   = 0x35
	jsetK  = 0x45
	andK   = 0x54
	retK   = 0x06
)

func run(prog []sandboxinit.SockFilter, load func(k uint32) (uint32, bool)) (steps int, verdict uint32, done bool, err error) {
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		f := prog[pc]
		jump := func(cond bool) {
			if cond {
				pc += int(f.Jt)
			} else {
				pc += int(f.Jf)
			}
		}
		switch f.Code {
		case ldAbsW:
			v, ok := load(f.K)
			if !ok {
				return steps, 0, false, nil
			}
			acc = v
		case ja:
			pc += int(f.K)
		case jeqK:
			jump(acc == f.K)
		case jgeK:
			jump(acc >= f.K)
		case jsetK:
			jump(acc&f.K != 0)
		case andK:
			acc &= f.K
		case retK:
			return steps, f.K, true, nil
		default:
			return steps, 0, false, fmt.Errorf("instruction %d: unknown code %#x", pc, f.Code)
		}
		steps++
	}
	return steps, 0, false, errors.New("the program ran off its end")
}

// Check refuses prog where the kernel would refuse it at load (classic
// BPF's checks and seccomp's, Linux's bpf_check_classic and
// seccomp_check_filter), on every instruction, reached or not: Verdict and
// Constant see only the ones the data they are given reaches. It is
// stricter than the kernel in three ways: an instruction must be one run
// reads; a return must be one of seccomp's actions, which the kernel
// takes any value for and treats an unknown one as killing the process;
// and an errno return's errno must be at most 4095 (MAX_ERRNO), which the
// kernel caps at that instead.
func Check(prog []sandboxinit.SockFilter) error {
	const (
		maxInsns     = 4096 // BPF_MAXINSNS
		seccompData  = 64   // sizeof(struct seccomp_data)
		actionMask   = 0xffff0000
		maxErrno     = 4095
		actErrno     = 0x00050000
		actKillThr   = 0x00000000
		actKillProc  = 0x80000000
		actTrap      = 0x00030000
		actUserNotif = 0x7fc00000
		actTrace     = 0x7ff00000
		actLog       = 0x7ffc0000
		actAllow     = 0x7fff0000
	)
	if len(prog) == 0 || len(prog) > maxInsns {
		return fmt.Errorf("%d instructions, the kernel takes 1 to %d", len(prog), maxInsns)
	}
	if prog[len(prog)-1].Code != retK {
		return fmt.Errorf("instruction %d, the last, is no return", len(prog)-1)
	}
	for pc, f := range prog {
		// Where a jump lands is counted from the next instruction.
		within := func(off uint32) bool { return uint64(pc)+1+uint64(off) < uint64(len(prog)) }
		switch f.Code {
		case ldAbsW:
			if f.K >= seccompData || f.K%4 != 0 {
				return fmt.Errorf("instruction %d loads offset %d of struct seccomp_data, not a word of its %d bytes", pc, f.K, seccompData)
			}
		case ja:
			if !within(f.K) {
				return fmt.Errorf("instruction %d jumps %d past itself, off the program's %d", pc, f.K, len(prog))
			}
		case jeqK, jgeK, jsetK:
			if !within(uint32(f.Jt)) || !within(uint32(f.Jf)) {
				return fmt.Errorf("instruction %d jumps %d or %d past itself, off the program's %d", pc, f.Jt, f.Jf, len(prog))
			}
		case andK:
		case retK:
			switch f.K & actionMask {
			case actErrno:
				if f.K&^actionMask > maxErrno {
					return fmt.Errorf("instruction %d returns errno %d", pc, f.K&^actionMask)
				}
			case actKillThr, actKillProc, actTrap, actUserNotif, actTrace, actLog, actAllow:
			default:
				return fmt.Errorf("instruction %d returns %#x, no seccomp action", pc, f.K)
			}
		default:
			return fmt.Errorf("instruction %d: unknown code %#x", pc, f.Code)
		}
	}
	return nil
}
