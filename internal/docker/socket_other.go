//go:build !unix

package docker

// socketGroup: no unix groups here.
func socketGroup(string) (string, bool) { return "", false }
