package mcpserve

import "testing"

func TestRootsAgreeWithTheWorkspace(t *testing.T) {
	for _, c := range []struct {
		name   string
		ws     string
		uri    string
		agrees bool
	}{
		{"the workspace itself", "/src/app", "file:///src/app", true},
		{"a subdirectory (the client opened there, pml walked up)", "/src/app", "file:///src/app/cmd/x", true},
		{"a parent holding several projects", "/src/app", "file:///src", true},
		{"a sibling whose name starts alike", "/src/app", "file:///src/app2", false},
		{"another project", "/src/app", "file:///home/me/other", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, ok := rootDir(c.uri)
			if !ok {
				t.Fatalf("%s: not a file root", c.uri)
			}
			if got := related(c.ws, d); got != c.agrees {
				t.Errorf("related(%s, %s) = %v", c.ws, d, got)
			}
		})
	}
	for _, uri := range []string{"https://example.com/x", "file://server/share", "relative/path", "file:relative"} {
		if d, ok := rootDir(uri); ok {
			t.Errorf("%s taken as the directory %s", uri, d)
		}
	}
}
