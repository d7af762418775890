//go:build linux || darwin

package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/api/client"
)

func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	return err == nil
}

// makeRaw puts the terminal in raw mode (as cfmakeraw does) so every key,
// ^C and ^D included, goes to the sandbox's terminal, whose line discipline
// does the echoing and signal generation. restore puts back what was there.
func makeRaw(fd int) (restore func(), err error) {
	old, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return nil, fmt.Errorf("reading terminal mode: %w", err)
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN] = 1
	raw.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(fd, ioctlSetTermios, &raw); err != nil {
		return nil, fmt.Errorf("setting raw terminal mode: %w", err)
	}
	return func() { _ = unix.IoctlSetTermios(fd, ioctlSetTermios, old) }, nil
}

func windowSize(fd int) (client.WindowSize, error) {
	ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
	if err != nil {
		return client.WindowSize{}, fmt.Errorf("reading window size: %w", err)
	}
	return client.WindowSize{Rows: uint32(ws.Row), Cols: uint32(ws.Col)}, nil
}

// watchResize sends the terminal's new size to out on every SIGWINCH until
// stop is called.
func watchResize(fd int, out chan<- client.WindowSize) (stop func()) {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-winch:
				ws, err := windowSize(fd)
				if err != nil {
					continue
				}
				select {
				case out <- ws:
				case <-done:
					return
				}
			}
		}
	}()
	return func() {
		signal.Stop(winch)
		close(done)
	}
}
