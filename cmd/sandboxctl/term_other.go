//go:build !linux && !darwin

package main

import (
	"errors"

	"github.com/sandboxd/sandboxd/api/client"
)

// On other systems --tty still allocates a terminal in the sandbox, but the
// local console is not switched to raw mode and resizes are not followed.

func isTerminal(int) bool { return false }

func makeRaw(int) (func(), error) {
	return nil, errors.New("raw terminal mode is not supported on this OS")
}

func windowSize(int) (client.WindowSize, error) {
	return client.WindowSize{}, errors.New("window size is not supported on this OS")
}

func watchResize(int, chan<- client.WindowSize) func() { return func() {} }
