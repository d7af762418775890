//go:build unix

package daemon

import (
	"fmt"
	"os"
	"syscall"

	"github.com/sandboxd/sandboxd/layers"
)

// ownerOf is the uid that owns path.
func ownerOf(path string) (uint32, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("%s: no owner to compare with the caller", path)
	}
	return st.Uid, nil
}

// layerIDMap is how a sandbox running as uid and gid sees the layered
// path: its owner and group as its own when the path is another's (a root
// caller's sandbox runs as another uid), so that it may write there as
// it may in a write root; nil when it is already its own.
func layerIDMap(path string, uid, gid uint32) (*layers.IDMap, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == uid {
		return nil, nil
	}
	return &layers.IDMap{Owner: st.Uid, Group: st.Gid, UID: uid, GID: gid}, nil
}
