//go:build !unix

package extramount

import "io/fs"

// identity: this host has no inode numbers; a pin is its path alone.
func identity(fs.FileInfo) (dev, ino uint64) { return 0, 0 }
