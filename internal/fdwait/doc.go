// Package fdwait starts a function when a file descriptor becomes
// readable, with no goroutine waiting for it meanwhile.
//
// A goroutine parked in the runtime's poller keeps its stack and its g
// for as long as it waits. The daemon has a few descriptors per session
// that stay quiet for as long as the session idles (its output pipes, the
// seccomp listener, the init's report pipe), and a goroutine waiting on
// each was most of what an idle session cost it. Here they wait in one
// epoll instance, which the runtime's poller waits on in turn through the
// one goroutine that dispatches its events; a registration that becomes
// readable starts its function on a goroutine of its own and is then
// disarmed until its owner rearms it. Idle is the hand-off between such a
// descriptor's reader and the waiter that the daemon's readers share: a
// descriptor enters the set only once it has been quiet for a while.
// Lazy keeps such a descriptor out of the runtime's poller, which holds
// 512 bytes for every file it has held at once, until it is first read,
// written or waited on.
//
// Only Linux has it; elsewhere Add returns ErrUnsupported, and the caller
// waits with a goroutine as before.
package fdwait
