// Package inputwait tells whether a session is waiting for input: for a
// terminal session, whether a task of the terminal's foreground process group
// is blocked reading the terminal; for a pipe session, whether a task of the
// session is blocked reading its stdin pipe.
//
// The answer comes from the kernel's view of the session's processes (which
// system call each task is blocked in, and on which open file), never from
// output going quiet: a program computing in silence is not waiting, and a
// prompt that keeps redrawing a spinner still is.
//
// Only Linux on amd64 is implemented; elsewhere the constructors return an
// error wrapping errors.ErrUnsupported.
package inputwait
