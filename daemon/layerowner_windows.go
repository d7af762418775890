package daemon

import (
	"fmt"

	"github.com/sandboxd/sandboxd/layers"
)

// ownerOf has no uid to give on Windows, where no layer can be made.
func ownerOf(path string) (uint32, error) {
	return 0, fmt.Errorf("%s: layers are not supported on windows", path)
}

// layerIDMap has nothing to map on Windows, where no layer can be made.
func layerIDMap(path string, uid, gid uint32) (*layers.IDMap, error) {
	return nil, fmt.Errorf("%s: layers are not supported on windows", path)
}
