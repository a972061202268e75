package npmspec

import "testing"

func TestName(t *testing.T) {
	for _, c := range []struct{ name, spec, want string }{
		{"a scoped spec loses its version", "@scope/name@1.2.3", "@scope/name"},
		{"a scoped name without a version is kept", "@scope/name", "@scope/name"},
		{"an unscoped spec loses its range", "name@^1", "name"},
		{"a bare name is kept", "name", "name"},
		{"an empty spec stays empty", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Name(c.spec); got != c.want {
				t.Fatalf("Name(%q) = %q, want %q", c.spec, got, c.want)
			}
		})
	}
}
