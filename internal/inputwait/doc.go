// Package inputwait tells what a session's processes are waiting on, from
// the kernel's view of them: which system call each task is blocked in, on
// which open files, and for how long at most.
//
// A session waits for input when every task of it is blocked, one of them
// on the input (for a terminal session, a task of the terminal's
// foreground process group reading the terminal; for a pipe session, a
// task reading its stdin pipe), and none on anything else that will let it
// go on. It is waiting (for something else) when every task is blocked and
// one waits on a timer due soon or on a local peer that has not read what
// it was sent; it waits for the network when one waits on a TCP connection
// being set up, or with a request sent and not yet answered. A task that
// can run makes the session running; so does a session whose tasks are all
// blocked on nothing the package can name (a long sleep, a listener, a
// lock), as before any of this could be told.
//
// The answer never comes from output going quiet: a program computing in
// silence is not waiting, and a prompt that keeps redrawing a spinner
// still is.
//
// Only Linux on amd64 is implemented; elsewhere the constructors return an
// error wrapping errors.ErrUnsupported.
package inputwait
