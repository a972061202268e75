//go:build !linux

package safefs

func setWalk(bool) {}
