//go:build !linux

package layers

import (
	"fmt"
	"os"
)

// Store is the daemon's layers; on this OS there are none.
type Store struct{}

// Open refuses: copy-on-write layers need Linux's overlay filesystem.
func Open(dir string) (*Store, []string, error) {
	return nil, nil, fmt.Errorf("%w: they need Linux's overlay filesystem", ErrUnsupported)
}

func (*Store) Close() error { return nil }

func (*Store) Create(session, path, parentSession string, owner Owner, sb Sandbox) (Info, *os.File, error) {
	return Info{}, nil, ErrUnsupported
}

func (*Store) Of(string) ([]Info, error)                     { return nil, ErrUnsupported }
func (*Store) List() ([]Info, error)                         { return nil, ErrUnsupported }
func (*Store) Size(string) (int64, error)                    { return 0, ErrUnsupported }
func (*Store) Release(string) error                          { return nil }
func (*Store) Diff(string, bool) ([]Diff, error)             { return nil, ErrUnsupported }
func (*Store) Commit(string, bool, []string) ([]Diff, error) { return nil, ErrUnsupported }
func (*Store) Discard(string) error                          { return ErrUnsupported }
