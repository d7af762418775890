//go:build unix

package daemon

import (
	"fmt"
	"os"
	"syscall"
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
