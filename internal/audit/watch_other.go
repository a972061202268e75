//go:build !linux

package audit

// pathWatch is inotify's (watch_linux.go); elsewhere the log checks its
// path on every entry.
type pathWatch struct{}

func newPathWatch(string) *pathWatch { return nil }
func (*pathWatch) arm(string) error  { return nil }
func (*pathWatch) changed() bool     { return true }
func (*pathWatch) close()            {}
