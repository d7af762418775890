package client

import (
	"context"
	"errors"
	"net"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"
)

// dialSocket connects to the daemon's named pipe at path. Identification
// is the impersonation level the daemon needs to read who is calling, and
// the lowest that lets it: it cannot act as the caller, which matters
// should something else hold the pipe's name.
func dialSocket(ctx context.Context, path string) (net.Conn, error) {
	return winio.DialPipeAccessImpLevel(ctx, path, windows.GENERIC_READ|windows.GENERIC_WRITE, winio.PipeImpLevelIdentification)
}

// nothingListens says whether a failed dialSocket found no daemon: a pipe
// disappears with its server, so there is no pipe of that name.
func nothingListens(err error) bool {
	return errors.Is(err, windows.ERROR_FILE_NOT_FOUND)
}
