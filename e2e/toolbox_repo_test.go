//go:build linux

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// PML_TOOLBOX_REPO: a pml so set finds no toolbox under that name, builds
// it from its in-container program on the first call and reads through
// it; pml images list names the same image; a tagged value is refused
// with the variable named, and no image is built under it.
func TestToolboxRepoFromTheEnvironmentIsBuiltAndUsed(t *testing.T) {
	repo := fmt.Sprintf("pml-e2e-toolbox-%d-%d/toolbox", os.Getpid(), time.Now().UnixNano())
	images := func() []string {
		out, err := exec.Command("docker", "images", "--format", "{{.Repository}}:{{.Tag}}", repo).Output()
		if err != nil {
			t.Fatalf("docker images: %v", err)
		}
		return strings.Fields(string(out))
	}
	t.Cleanup(func() {
		for _, ref := range images() {
			_ = exec.Command("docker", "rmi", ref).Run()
		}
	})
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:read_file"]}}`)
	ws.write("hello.txt", "hello through a toolbox of its own")
	if got := images(); len(got) != 0 {
		t.Fatalf("%s exists before the call: %v", repo, got)
	}
	env := []string{"PML_TOOLBOX_REPO=" + repo}
	r := runCLI(t, ws.Dir, env, "", "call", "filesystem:read_file", `{"path": "hello.txt"}`)
	if out := callJSON(t, r); r.code != 0 || out.Text != "hello through a toolbox of its own" {
		t.Fatalf("read_file: exit %d %+v\n%s", r.code, out, r.stderr)
	}
	built := images()
	if len(built) != 1 {
		t.Fatalf("images named %s after the call: %v", repo, built)
	}
	ctrs, err := exec.Command("docker", "ps", "-a", "--filter", "label=pml.workspace="+ws.Dir, "--format", "{{.Image}}").Output()
	if err == nil && len(strings.Fields(string(ctrs))) > 0 && !strings.Contains(string(ctrs), repo) {
		t.Errorf("the workspace's containers run %q, not %s", ctrs, built[0])
	}
	if l := runCLI(t, ws.Dir, env, "", "images", "list"); !strings.Contains(string(l.stdout)+string(l.stderr), built[0]) {
		t.Errorf("pml images list does not name %s (exit %d):\n%s%s", built[0], l.code, l.stdout, l.stderr)
	}

	bad := repo + "-tagged:v1"
	r = runCLI(t, ws.Dir, []string{"PML_TOOLBOX_REPO=" + bad}, "", "call", "filesystem:read_file", `{"path": "hello.txt"}`)
	text := string(r.stdout) + logText(r.stderr)
	if r.code == 0 || !strings.Contains(text, `PML_TOOLBOX_REPO="`+bad+`" is not an image repository name`) || !strings.Contains(text, "unset it or fix it") {
		t.Errorf("a tagged PML_TOOLBOX_REPO: exit %d\n%s", r.code, text)
	}
	out, _ := exec.Command("docker", "images", "-q", repo+"-tagged").Output()
	if len(strings.TrimSpace(string(out))) != 0 {
		t.Errorf("an image was built under the refused name: %s", out)
	}
}
