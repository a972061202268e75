//go:build !linux

package deps

import (
	"io/fs"
	"time"
)

// stamp is what a file's stat says of its identity and last change; off
// Linux none is taken, and deps.json is read on every ask.
type stamp struct{}

func stampOf(fs.FileInfo) (stamp, bool) { return stamp{}, false }

func (stamp) settled(time.Time) bool { return false }
