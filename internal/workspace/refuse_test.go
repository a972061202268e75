//go:build !windows

package workspace

import "testing"

func TestRefused(t *testing.T) {
	home := t.TempDir()
	for dir, refused := range map[string]bool{
		"/": true, home: true, "/etc": true, "/etc/nginx": true, "/usr": true, "/usr/local": true, "/var": true,
		"/proc/self": true, "/sys/fs": true, "/dev": true, "/boot": true, "/lib64": true, "/run": true, "/root": true, "/home": true, "/tmp": true,
		home + "/src/app": false, "/usr/local/src/app": false, "/var/www/site": false, "/srv/app": false, "/tmp/x": false,
	} {
		if got := Refused(dir, home) != ""; got != refused {
			t.Errorf("Refused(%q) = %q, want refused %v", dir, Refused(dir, home), refused)
		}
	}
	// The directories holding the home are refused as holding it.
	if why := Refused("/tmp", "/tmp/me"); why == "" {
		t.Errorf("a directory holding the home is not refused")
	}
}
