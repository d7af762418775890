package transport

// readyRead is empty on Windows: grpc reads a named pipe through a buffer
// of its own, the wrapper or not (see readyread_unix.go).
type readyRead struct{}
