//go:build !linux

package main

// termWidth is unknown here; the progress renderer assumes 80 columns.
func termWidth(fd uintptr) int { return 0 }
