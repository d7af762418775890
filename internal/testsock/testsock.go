// Package testsock gives tests a place where sandboxd's client can reach a
// server they run: a unix socket, or on Windows, where the client dials
// named pipes, a named pipe.
package testsock
