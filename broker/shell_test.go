package broker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestShellExec(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["shell:exec"]}}`)
	if err := os.Mkdir(filepath.Join(f.ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		args    map[string]any
		isError bool
		want    string
	}{
		{"runs in the workspace", map[string]any{"command": "echo hi"}, false, "in " + f.ws + " ran echo hi"},
		{"runs in cwd", map[string]any{"command": "ls", "cwd": "sub"}, false, "ran ls"},
		{"a failing command is an error with its exit code", map[string]any{"command": "fail"}, true, "exit code: 3"},
		{"stderr is kept", map[string]any{"command": "loud"}, false, "complaint"},
		{"no command", map[string]any{"command": " "}, true, "needs the argument \"command\""},
		{"cwd not a string", map[string]any{"command": "ls", "cwd": 3}, true, `argument "cwd": 3 has type "integer", want "string"`},
		{"cwd outside", map[string]any{"command": "ls", "cwd": "../"}, true, "outside"},
		{"cwd missing", map[string]any{"command": "ls", "cwd": "nope"}, true, "not an existing directory"},
		{"cwd with a line break", map[string]any{"command": "ls", "cwd": "a\nb"}, true, "line break"},
		{"timeout_ms not whole", map[string]any{"command": "ls", "timeout_ms": 1.5}, true, `argument "timeout_ms": 1.5 has type "number", want "integer"`},
		{"timeout_ms shortens", map[string]any{"command": "ls", "timeout_ms": 60000}, false, "ran ls"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.call(t, "shell:exec", tc.args)
			if r.IsError != tc.isError || !strings.Contains(r.Text, tc.want) {
				t.Fatalf("isError=%v %q, want isError=%v and %q", r.IsError, r.Text, tc.isError, tc.want)
			}
		})
	}
}
