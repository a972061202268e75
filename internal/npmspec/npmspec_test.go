package npmspec

import (
	"strings"
	"testing"
)

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

func TestInstallSpecs(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"install", "--prefix", "/deps", "--no-audit", "--no-fund", "@x/y@1.0.0"}, "@x/y@1.0.0"},
		{[]string{"install", "--registry", "http://127.0.0.1:9/", "--fetch-retries", "0", "a@1"}, "a@1"},
		{[]string{"--prefix=/deps", "i", "a@1", "b"}, "a@1 b"},
		{[]string{"install", "a@1", "--no-fund", "b"}, "a@1 b"},
		{[]string{"install", "--unknown", "b", "a@1"}, "b a@1"},
		{[]string{"install", "a@1", "--", "b"}, "a@1 b"},
		{[]string{"--", "install", "b"}, "b"},
		{[]string{"install"}, ""},
	} {
		if got := strings.Join(InstallSpecs(c.args), " "); got != c.want {
			t.Errorf("InstallSpecs(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}
