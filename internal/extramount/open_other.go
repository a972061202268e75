//go:build !linux

package extramount

import "os"

// openNoLinks opens p refusing a link on its way: without openat2, by
// looking at each component first (openWalk).
func openNoLinks(p string) (*os.File, error) { return openWalk(p) }
