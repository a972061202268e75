//go:build !unix

package extramount

import "errors"

func mkfifo(string) error { return errors.New("not on this system") }
