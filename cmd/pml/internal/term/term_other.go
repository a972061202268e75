//go:build !linux

package term

import "errors"

// HideInput is not implemented here: the key prompt then says that the
// input will be visible (or use --api-key / PML_API_KEY instead).
func HideInput(fd int) (restore func(), err error) {
	return nil, errors.New("hiding typed input is not supported on this system")
}

// Width is unknown here; the progress renderer assumes 80 columns.
func Width(fd uintptr) int { return 0 }
