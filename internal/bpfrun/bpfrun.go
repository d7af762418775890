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
