//go:build !linux

package main

import "errors"

// hideInput is not implemented here: the key prompt then says that the
// input will be visible (or use --api-key / PML_API_KEY instead).
func hideInput(fd int) (restore func(), err error) {
	return nil, errors.New("hiding typed input is not supported on this system")
}
