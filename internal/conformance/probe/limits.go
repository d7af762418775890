package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

const mib = 1 << 20

// memHog allocates BYTES in 1 MiB steps and writes to every page of each,
// so the memory is resident, not only reserved, and keeps all of it until
// it is done. It prints nothing before: a hog killed on the way leaves no
// line, and the suite sees the session killed instead.
func memHog(args []string) Result {
	n, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil {
		return Result{Errno: "EINVAL", Detail: err.Error()}
	}
	chunks := make([][]byte, 0, n/mib+1)
	for left := n; left > 0; {
		size := min(left, mib)
		b := make([]byte, size)
		for i := 0; i < len(b); i += os.Getpagesize() {
			b[i] = 1
		}
		chunks = append(chunks, b)
		left -= size
	}
	touched := uint64(0)
	for _, c := range chunks {
		touched += uint64(len(c))
	}
	return outcome(nil, fmt.Sprintf("%d bytes touched", touched))
}

// spewChunk is the size of each write of spew.
const spewChunk = 64 << 10

// spew writes BYTES of 'x', without a newline, to stdout in writes of 64
// KiB: a terminal leaves it as it is, so what the suite receives can be
// counted exactly.
func spew(args []string) Result {
	n, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil {
		return Result{Errno: "EINVAL", Detail: err.Error()}
	}
	chunk := bytes.Repeat([]byte{'x'}, spewChunk)
	written := uint64(0)
	for written < n {
		w, err := os.Stdout.Write(chunk[:min(uint64(len(chunk)), n-written)])
		written += uint64(w)
		if err != nil {
			return outcome(err, fmt.Sprintf("%d bytes written", written))
		}
	}
	return outcome(nil, fmt.Sprintf("%d bytes written", written))
}
