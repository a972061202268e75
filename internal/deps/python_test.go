package deps

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
)

func TestReadPipReport(t *testing.T) {
	rep := `{"version": "1", "install": [
 {"download_info": {"url": "http://i/files/b-1.0-py3-none-any.whl", "archive_info": {"hash": "sha256=` + strings.Repeat("b", 64) + `", "hashes": {"sha256": "` + strings.Repeat("b", 64) + `"}}}, "metadata": {"name": "B_Pkg", "version": "1.0"}},
 {"download_info": {"url": "http://i/files/a-2.0-py3-none-any.whl", "archive_info": {"hash": "sha256=` + strings.Repeat("a", 64) + `"}}, "metadata": {"name": "a", "version": "2.0"}}]}`
	dists, err := readPipReport([]byte(rep))
	if err != nil {
		t.Fatal(err)
	}
	lock := PythonLock(dists)
	want := "a==2.0 --hash=sha256:" + strings.Repeat("a", 64) + "\nb-pkg==1.0 --hash=sha256:" + strings.Repeat("b", 64) + "\n"
	if lock != want {
		t.Errorf("lock:\n%s\nwant:\n%s", lock, want)
	}
	if !strings.HasPrefix(PythonIntegrity(lock), "sha256-") {
		t.Errorf("integrity %s", PythonIntegrity(lock))
	}
	// A distribution pip installed from somewhere without a hash (a
	// local directory, a VCS URL) cannot be pinned: refused.
	if _, err := readPipReport([]byte(`{"install": [{"download_info": {"url": "file:///x", "dir_info": {}}, "metadata": {"name": "x", "version": "1"}}]}`)); err == nil {
		t.Error("a distribution without a hash was accepted")
	}
}

func TestPythonIndexOf(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	if ix := PythonIndexOf(get); ix.URL != DefaultPythonIndex {
		t.Errorf("default: %+v", ix)
	}
	conf := filepath.Join(home, ".config", "pip", "pip.conf")
	_ = os.MkdirAll(filepath.Dir(conf), 0o755)
	_ = os.WriteFile(conf, []byte("[global]\n# a comment\nindex_url = https://u:pw@pypi.example/simple\ntimeout = 3\n"), 0o600)
	if ix := PythonIndexOf(get); ix.URL != "https://u:pw@pypi.example/simple" || ix.From != conf || ix.Redacted() != "https://u:xxxxx@pypi.example/simple" {
		t.Errorf("pip.conf: %+v %s", ix, ix.Redacted())
	}
	env["UV_INDEX_URL"] = "https://uv.example/simple"
	if ix := PythonIndexOf(get); ix.URL != "https://uv.example/simple" {
		t.Errorf("UV_INDEX_URL: %+v", ix)
	}
	env["PIP_INDEX_URL"] = "https://pip.example/simple"
	if ix := PythonIndexOf(get); ix.URL != "https://pip.example/simple" || ix.From != "PIP_INDEX_URL" {
		t.Errorf("PIP_INDEX_URL: %+v", ix)
	}
	if h := pythonHosts(Index{URL: DefaultPythonIndex}); len(h) != 2 || h[1] != "files.pythonhosted.org:443" {
		t.Errorf("PyPI's hosts: %v", h)
	}
	if h := pythonHosts(Index{URL: "http://127.0.0.1:8080/simple/"}); len(h) != 1 || h[0] != "127.0.0.1:8080" {
		t.Errorf("a loopback index's hosts: %v", h)
	}
}

func TestPipFailureAndRedaction(t *testing.T) {
	ix := Index{URL: "https://bob:hunter2@pypi.example/simple/"}
	mismatch := "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE.\n    greet==1.0 from https://pypi.example/files/greet.whl:\n        Expected sha256 aaaa\n             Got        bbbb\n"
	if m := pipFailure("py", "x", ix, mismatch); !strings.Contains(m, "Expected sha256 aaaa") || !strings.Contains(m, "does not match") || strings.Contains(m, "hunter2") {
		t.Errorf("mismatch: %s", m)
	}
	if m := pipFailure("py", "x==9", ix, "ERROR: Could not find a version that satisfies the requirement x==9"); !strings.Contains(m, "compiler") {
		t.Errorf("no version: %s", m)
	}
	if m := pipFailure("py", "x", ix, "WARNING: Retrying ... NewConnectionError\nERROR: Could not find a version"); m != "" {
		t.Errorf("an unreachable index taken for a missing package: %s", m)
	}
	if s := redactIndex("Looking in indexes: https://bob:hunter2@pypi.example/simple/ (hunter2)", ix); strings.Contains(s, "hunter2") {
		t.Errorf("redacted: %s", s)
	}
	for spec, name := range map[string]string{"mcp-server-time": "mcp-server-time", "a_b.c==1.0": "a_b.c", "x@1.2": "x", "../x": "", "-x": ""} {
		if got := PipName(spec); got != name {
			t.Errorf("PipName(%q) = %q, want %q", spec, got, name)
		}
	}
	if r := PipRequirement("x@1.2"); r != "x==1.2" {
		t.Errorf("PipRequirement: %s", r)
	}
}

func TestCheckPipStep(t *testing.T) {
	for args, ok := range map[string]bool{
		"install x":                    true,
		"install x==1.0":               true,
		"install x@1.0":                true,
		"install --index-url=http://e": false,
		"install x @ http://e/x.whl":   false,
		"install x y":                  false,
		"download x":                   false,
		"install ../x":                 false,
	} {
		inst := &config.Install{Command: "pip", Args: strings.Fields(args)}
		if args == "install x @ http://e/x.whl" {
			inst.Args = []string{"install", "x @ http://e/x.whl"}
		}
		if err := CheckPipStep("py", inst); (err == nil) != ok {
			t.Errorf("%q: %v", args, err)
		}
	}
}
