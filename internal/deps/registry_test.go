package deps

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
)

func TestNPMRegistryOrder(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	check := func(what, pkg, want, from string, project bool) {
		t.Helper()
		got := NPMRegistry(ws, pkg, get)
		if got.URL != want || (from != "" && got.From != from) || got.Project != project {
			t.Errorf("%s: %+v, want %s from %s (project %v)", what, got, want, from, project)
		}
	}
	check("nothing configured", "pkg", DefaultNPMRegistry, "npm's default", false)
	if !NPMRegistry(ws, "pkg", get).Default() {
		t.Error("npm's default is not Default")
	}
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(home, ".npmrc"), "; a comment\n//npm.home.test/:_authToken=secret\nregistry = https://npm.home.test/\n@corp:registry=https://corp.home.test/\n")
	check("~/.npmrc", "pkg", "https://npm.home.test/", filepath.Join(home, ".npmrc"), false)
	check("~/.npmrc's scope", "@corp/pkg", "https://corp.home.test/", "", false)
	write(filepath.Join(ws, ".npmrc"), "# the repository's\nregistry=\"http://127.0.0.1:4873/\"\n@corp:registry=http://corp.ws.test/${SUFFIX}\n")
	check("the workspace's .npmrc", "pkg", "http://127.0.0.1:4873/", filepath.Join(ws, ".npmrc"), true)
	env["SUFFIX"] = "npm/"
	check("the workspace's scope", "@corp/pkg", "http://corp.ws.test/npm/", "", true)
	env["NPM_CONFIG_REGISTRY"] = "http://127.0.0.1:5000/"
	check("the environment", "pkg", "http://127.0.0.1:5000/", "NPM_CONFIG_REGISTRY", false)
	check("a scope beats the environment's registry, as in npm", "@corp/pkg", "http://corp.ws.test/npm/", "", true)
	env["npm_config_registry"] = "http://127.0.0.1:6000/"
	check("npm_config_registry", "pkg", "http://127.0.0.1:6000/", "npm_config_registry", false)

	inst := &config.Install{Command: "npm", Args: []string{"install", "--registry", "http://127.0.0.1:7000/", "pkg@1.0.0"}, Package: "pkg"}
	if got := NPMRegistryOf(inst, ws, get); got.URL != "http://127.0.0.1:7000/" || got.From != "--registry" {
		t.Errorf("--registry in the step: %+v", got)
	}
	if got := RegistryHosts(inst, ws, get); len(got) != 1 || got[0] != "127.0.0.1:7000" {
		t.Errorf("RegistryHosts: %v", got)
	}
	if got := RegistryHosts(&config.Install{Command: "npx", Args: []string{"-y", "pkg"}, Package: "pkg"}, ws, get); len(got) != 1 || got[0] != "127.0.0.1:6000" {
		t.Errorf("RegistryHosts of npx: %v", got)
	}
}

// A workspace .npmrc that is a link is not followed: the repository
// wrote it.
func TestNPMRegistryDoesNotFollowAWorkspaceLink(t *testing.T) {
	home, ws, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	if err := os.WriteFile(filepath.Join(elsewhere, "npmrc"), []byte("registry=http://127.0.0.1:1/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(elsewhere, "npmrc"), filepath.Join(ws, ".npmrc")); err != nil {
		t.Fatal(err)
	}
	if got := NPMRegistry(ws, "pkg", func(string) string { return "" }); !got.Default() {
		t.Errorf("a linked .npmrc was read: %+v", got)
	}
}

func TestNPMAuthComesFromTheUsersNpmrcOnly(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	env := func(k string) string { return map[string]string{"NPM_TOKEN": "from-env"}[k] }
	if err := os.WriteFile(filepath.Join(home, ".npmrc"), []byte("//npm.corp.test/:_authToken=root-token\n//npm.corp.test/team/:_authToken=${NPM_TOKEN}\n//127.0.0.1:4873/:_authToken = \"local\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".npmrc"), []byte("//other.test/:_authToken=${NPM_TOKEN}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ url, key, token string }{
		{"https://npm.corp.test/", "//npm.corp.test/:_authToken", "root-token"},
		{"https://npm.corp.test/team/npm/", "//npm.corp.test/team/:_authToken", "from-env"},
		{"http://127.0.0.1:4873", "//127.0.0.1:4873/:_authToken", "local"},
		{"https://other.test/", "", ""},
		{"https://npm.corp.test:8443/", "", ""},
	} {
		if k, tok := NPMAuth(c.url, env); k != c.key || tok != c.token {
			t.Errorf("NPMAuth(%s) = %q, %q; want %q, %q", c.url, k, tok, c.key, c.token)
		}
	}
	// The registry keys never carry a token along.
	if r := NPMRegistry(ws, "pkg", env); strings.Contains(r.URL+r.From, "token") {
		t.Errorf("NPMRegistry: %+v", r)
	}
}
