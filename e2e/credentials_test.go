//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// No secret in a project file: pml init --api-key puts the key in the
// user's credentials file, nowhere in the workspace, and a pml stdio
// started exactly as .mcp.json says (PML_API_KEY unset) still sends it.
func TestInitAPIKeyGoesToTheCredentialsFileAndStillReachesTheCloud(t *testing.T) {
	const key = cloudKey // the fake cloud accepts only this key
	fc := newFakeCloud(t)
	ws := newWorkspace(t, "")
	home := t.TempDir()
	cfgHome := filepath.Join(home, "xdg")
	userEnv := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + cfgHome}

	r := runCLI(t, ws.Dir, userEnv, "", "init", "--yes", "--api-key", key, "--cloud-url", fc.srv.URL)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if bytes.Contains(r.stdout, []byte(key)) || bytes.Contains(r.stderr, []byte(key)) {
		t.Errorf("the key was printed:\n%s%s", r.stdout, r.stderr)
	}
	// Every file in the workspace, whatever its name.
	_ = filepath.Walk(ws.Dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			t.Errorf("walking the workspace: %v", err)
			return nil
		}
		if info.Mode().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(key)) {
				t.Errorf("the key is in %s", p)
			}
		}
		return nil
	})
	cred := filepath.Join(cfgHome, "pml", "credentials")
	st, err := os.Stat(cred)
	if err != nil {
		t.Fatalf("no credentials file: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("credentials file mode %04o, want 0600", st.Mode().Perm())
	}
	if dst, _ := os.Stat(filepath.Dir(cred)); dst.Mode().Perm() != 0o700 {
		t.Errorf("credentials directory mode %04o, want 0700", dst.Mode().Perm())
	}
	if b, _ := os.ReadFile(cred); !bytes.Contains(b, []byte(key)) {
		t.Errorf("the credentials file does not hold the key")
	}
	if ignore := readFile(t, ws.path(".gitignore")); lineCount(ignore, ".mcp.json") != 0 {
		t.Errorf(".mcp.json holds no secret but is ignored: %q", ignore)
	}
	// .pml.json is not the subject: allow the cloud tool without a dialog.
	ws.write(".pml.json", cloudConfig(fc.srv.URL, ""))

	s := startFromMCPJSON(t, ws, userEnv)
	if out, res := s.call(t, "json:parse", map[string]any{"text": "{}"}); res.IsError || !strings.Contains(out, "cloud ran json:parse") {
		t.Fatalf("json:parse: %q\nstderr:\n%s", out, s.stderr.String())
	}
	calls := fc.calls("json:parse")
	if len(calls) != 1 || calls[0].Header.Get("x-api-key") != key {
		t.Errorf("the cloud got %d calls; key sent: %v", len(calls), len(calls) == 1 && calls[0].Header.Get("x-api-key") == key)
	}
	// After the session too: nothing pml wrote in the workspace (.pml/
	// caches, audit) nor its log holds the key.
	secretsAbsent(t, ws, s.stderr.String(), key)
}

// A .mcp.json an older pml wrote holds the key: pml init --yes moves it
// to the credentials file; without a terminal and without --yes it writes
// nothing and says so.
func TestInitMovesTheKeyOutOfAnOldMCPJSON(t *testing.T) {
	const key = "pml-old-e2e-key-4c2d"
	ws := newWorkspace(t, "")
	cfgHome := t.TempDir()
	userEnv := []string{"XDG_CONFIG_HOME=" + cfgHome}
	old := `{"mcpServers": {"other": {"command": "x"}, "pml": {"command": "/old/pml", "args": ["stdio"], "env": {"PML_API_KEY": "` + key + `"}}}}`
	ws.write(".mcp.json", old)
	cred := filepath.Join(cfgHome, "pml", "credentials")

	before := snapshotFiles(t, ws.Dir)
	r := runCLI(t, ws.Dir, userEnv, "", "init")
	if r.code != 2 || !strings.Contains(logText(r.stderr), "Nothing was written") || !strings.Contains(logText(r.stderr), "API key in it would move") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if after := snapshotFiles(t, ws.Dir); len(after) != len(before) || after["/.mcp.json"] != old {
		t.Errorf("files changed without consent: %v", after)
	}
	if _, err := os.Stat(cred); err == nil {
		t.Error("the credentials file was written without consent")
	}

	r = runCLI(t, ws.Dir, userEnv, "", "init", "--yes")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(cred); !bytes.Contains(b, []byte(key)) {
		t.Error("the key did not reach the credentials file")
	}
	mcpFile := readFile(t, ws.path(".mcp.json"))
	if strings.Contains(mcpFile, key) || !strings.Contains(mcpFile, `"other"`) {
		t.Errorf(".mcp.json:\n%s", mcpFile)
	}
	if readFile(t, ws.path(".mcp.json.backup")) != old {
		t.Error("no faithful backup")
	}
	if st, _ := os.Stat(ws.path(".mcp.json.backup")); st.Mode().Perm()&0o077 != 0 {
		t.Errorf("the backup holds the key with mode %04o", st.Mode().Perm())
	}
}

// startFromMCPJSON starts the pml server exactly as .mcp.json describes
// it (command, args, env) on top of userEnv, with PML_API_KEY unset.
func startFromMCPJSON(t *testing.T, ws *workspace, userEnv []string) *session {
	t.Helper()
	var doc struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(readFile(t, ws.path(".mcp.json"))), &doc); err != nil {
		t.Fatal(err)
	}
	e, ok := doc.MCPServers["pml"]
	if !ok {
		t.Fatal("no pml server in .mcp.json")
	}
	return startAsConfigured(t, ws.Dir, e.Command, e.Args, e.Env, userEnv)
}

// startAsConfigured starts a server as a client's file says: command,
// args and env on top of userEnv, in dir (the directory the client was
// opened in: the file pins no workspace), PML_API_KEY unset.
func startAsConfigured(t *testing.T, dir, command string, args []string, extra map[string]string, userEnv []string) *session {
	t.Helper()
	cmd := exec.Command(command, args...)
	cmd.Dir = dir
	env := cliEnv(userEnv...)
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	cmd.Env = env
	return connect(t, cmd, nil)
}

// --api-key - reads the key from stdin (out of shell history); a value
// that cannot be a key is refused before anything is written.
func TestInitReadsTheKeyFromStdin(t *testing.T) {
	const key = "pml-stdin-e2e-key-9b1f"
	ws := newWorkspace(t, "")
	cfgHome := t.TempDir()
	userEnv := []string{"XDG_CONFIG_HOME=" + cfgHome, "HOME=" + t.TempDir()}
	cred := filepath.Join(cfgHome, "pml", "credentials")

	before := snapshotFiles(t, ws.Dir)
	r := runCLI(t, ws.Dir, userEnv, "y\n", "init", "--api-key", "-")
	if r.code != 2 || !strings.Contains(logText(r.stderr), "too short to be a PML API key") {
		t.Fatalf("a \"y\" as the key: exit %d\n%s", r.code, r.stderr)
	}
	if after := snapshotFiles(t, ws.Dir); len(after) != len(before) {
		t.Errorf("files written for a refused key: %v", after)
	}
	if _, err := os.Stat(cred); err == nil {
		t.Error("the credentials file was written for a refused key")
	}

	r = runCLI(t, ws.Dir, userEnv, key+"\n", "init", "--api-key", "-")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(cred); !bytes.Contains(b, []byte(key)) {
		t.Error("the key from stdin did not reach the credentials file")
	}
	if strings.Contains(logText(r.stderr), key) || strings.Contains(readFile(t, ws.path(".mcp.json")), key) {
		t.Error("the key was printed or written into .mcp.json")
	}
}
