//go:build linux

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// The `pml images` tests run a real OCI registry (go-containerregistry's,
// built by `make registry-bin` into ~/.cache/pml/bin; e2e/registry/build.sh)
// on a free 127.0.0.1 port with a temporary blob directory, and push FROM
// scratch images made here to it. The Engine pulls from 127.0.0.0/8 over
// plain HTTP without any daemon configuration. Every image name carries a
// random nonce and is removed in t.Cleanup.

// ociRegistry is one running registry process.
type ociRegistry struct {
	Addr string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

func registryBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("PML_REGISTRY_BIN")
	if bin == "" {
		home, _ := os.UserHomeDir()
		bin = filepath.Join(home, ".cache", "pml", "bin", "registry-ggcr-v0.22.1") // the Makefile's REGISTRY_BIN
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the OCI registry binary %s is missing: run `make registry-bin` (builds it once from the Go module proxy): %v", bin, err)
	}
	return bin
}

func startOCIRegistry(t *testing.T) *ociRegistry {
	t.Helper()
	bin := registryBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	r := &ociRegistry{Addr: addr, out: &syncBuffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(bin, addr, filepath.Join(dir, "blobs"))
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(r.stop)
	waitFor(t, "the registry on "+addr, 30*time.Second, func() bool {
		select {
		case <-r.done:
			t.Fatalf("the registry exited:\n%s", r.out.String())
		default:
		}
		resp, err := http.Get("http://" + addr + "/v2/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return r
}

// stop ends the registry (idempotent).
func (r *ociRegistry) stop() {
	select {
	case <-r.done:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

func imagesEngine(t *testing.T) *client.Client {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func imgNonce(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// importTestImage creates ref FROM scratch: the file at bin as /<name> (the
// entrypoint) plus a nonce file, so every test run has its own digest.
// labels are applied; the image is removed at cleanup.
func importTestImage(t *testing.T, cli *client.Client, ref, bin string, labels map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, data []byte, mode int64) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	changes := []string{}
	if bin != "" {
		data, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		add(filepath.Base(bin), data, 0o755)
		changes = append(changes, fmt.Sprintf(`ENTRYPOINT ["/%s"]`, filepath.Base(bin)))
	}
	add("nonce", []byte(ref+" "+imgNonce(t)), 0o644)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	for k, v := range labels {
		changes = append(changes, fmt.Sprintf("LABEL %s=%s", k, v))
	}
	rc, err := cli.ImageImport(context.Background(), image.ImportSource{Source: &buf, SourceName: "-"}, ref, image.ImportOptions{Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, rc)
	rc.Close()
	ins, err := cli.ImageInspect(context.Background(), ref)
	if err != nil {
		t.Fatalf("importing %s: %v", ref, err)
	}
	t.Cleanup(func() { removeTestImage(t, cli, ins.ID) })
	return ins.ID
}

// pushImage sends ref to its registry and returns the manifest digest.
func pushImage(t *testing.T, cli *client.Client, ref string) string {
	t.Helper()
	// The Engine wants an X-Registry-Auth header even for an open
	// registry: "{}" base64-encoded.
	rc, err := cli.ImagePush(context.Background(), ref, image.PushOptions{RegistryAuth: "e30="})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	dec := json.NewDecoder(rc)
	for {
		var m struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if m.Error != "" {
			t.Fatalf("pushing %s: %s", ref, m.Error)
		}
	}
	ins, err := cli.ImageInspect(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	name := ref[:strings.LastIndex(ref, ":")]
	for _, d := range ins.RepoDigests {
		if strings.HasPrefix(d, name+"@") {
			return strings.TrimPrefix(d, name+"@")
		}
	}
	t.Fatalf("no digest for %s after the push: %v", ref, ins.RepoDigests)
	return ""
}

// removeTestImage removes an image and every name it has (if present).
func removeTestImage(t *testing.T, cli *client.Client, id string) {
	t.Helper()
	_, err := cli.ImageRemove(context.Background(), id, image.RemoveOptions{Force: true, PruneChildren: true})
	if err != nil && !strings.Contains(err.Error(), "No such image") {
		t.Errorf("removing %s: %v", id, err)
	}
}

func localImageID(cli *client.Client, ref string) (string, bool) {
	ins, err := cli.ImageInspect(context.Background(), ref)
	if err != nil {
		return "", false
	}
	return ins.ID, true
}

// runImagesCmd runs pml in ws and returns stdout, stderr and the exit code.
func runImagesCmd(t *testing.T, ws *workspace, args ...string) (string, string, int) {
	t.Helper()
	cmd := execPML(ws, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

func writeImageManifest(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(p, []byte("version: 1\nimages:\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestImagesPullByDigestRefusesAMismatchAndFailsOnAMissingImage(t *testing.T) {
	cli := imagesEngine(t)
	reg := startOCIRegistry(t)
	repo := reg.Addr + "/pml-e2e-" + imgNonce(t) + "/app"
	ref := repo + ":v1"
	id := importTestImage(t, cli, ref, "", nil)
	digest := pushImage(t, cli, ref)
	removeTestImage(t, cli, id)

	// Two servers and the manifest name one image: one pull.
	ws := newWorkspace(t, fmt.Sprintf(`{"mcps": {"a": {"image": %q, "command": "/x"}, "b": {"image": %q, "command": "/x"}}}`,
		repo+"@"+digest, ref))
	man := writeImageManifest(t, fmt.Sprintf("  - {name: app, ref: %q, digest: %q, source: registry}\n", ref, digest))
	stdout, stderr, code := runImagesCmd(t, ws, "images", "pull", "--manifest", man)
	if code != 0 {
		t.Fatalf("pull: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	stderr = logText(stderr)
	pinned := regexp.QuoteMeta(ref + "@" + digest)
	if n := strings.Count(stderr, "pulling "+ref+"@"+digest+"\n"); n != 1 {
		t.Errorf("want exactly one pull of the image, got %d:\n%s", n, stderr)
	}
	if !regexp.MustCompile(`(?m)^pulled ` + pinned + ` \([0-9.]+ MB\) in [0-9.]+s$`).MatchString(stderr) {
		t.Errorf("no plain progress line for the pull:\n%s", stderr)
	}
	if !regexp.MustCompile(`(?m)^` + pinned + `\s+pulled\s`).MatchString(stdout) {
		t.Errorf("summary:\n%s", stdout)
	}
	pulledID, ok := localImageID(cli, repo+"@"+digest)
	if !ok || pulledID != id {
		t.Fatalf("after the pull %s@%s is %q (want %s)", repo, digest, pulledID, id)
	}
	// Pulled again: verified by digest, nothing pulled.
	_, stderr, code = runImagesCmd(t, ws, "images", "pull", "--manifest", man)
	if code != 0 || !strings.Contains(stderr, "present "+ref+"@"+digest+" (pinned digest verified)") || strings.Contains(stderr, "pulling") {
		t.Errorf("second pull: exit %d\n%s", code, stderr)
	}

	// A manifest pinning another digest: refused, the tag left as it was.
	wrong := "sha256:" + strings.Repeat("0", 63) + "1"
	bad := writeImageManifest(t, fmt.Sprintf("  - {name: app, ref: %q, digest: %q, source: registry}\n", ref, wrong))
	ws2 := newWorkspace(t, "")
	stdout, stderr, code = runImagesCmd(t, ws2, "images", "pull", "--manifest", bad)
	if code == 0 {
		t.Fatalf("a digest mismatch was accepted:\n%s\n%s", stdout, stderr)
	}
	if want := fmt.Sprintf("tag %s resolved to %s, the manifest pins %s", ref, digest, wrong); !strings.Contains(stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, stderr)
	}
	if got, _ := localImageID(cli, ref); got != id {
		t.Errorf("the tag %s moved to %q", ref, got)
	}

	// A missing image fails the command, naming it; the others still pull.
	removeTestImage(t, cli, id)
	missing := repo + "-missing:v1"
	ws3 := newWorkspace(t, fmt.Sprintf(`{"mcps": {"gone": {"image": %q, "command": "/x"}, "here": {"image": %q, "command": "/x"}}}`, missing, ref))
	stdout, stderr, code = runImagesCmd(t, ws3, "images", "pull", "--manifest", writeImageManifest(t, ""))
	if code == 0 {
		t.Fatalf("a missing image did not fail the pull:\n%s\n%s", stdout, stderr)
	}
	if !strings.Contains(stderr, "failed "+missing+": ") || !strings.Contains(stderr, "1 of 3 images failed") || !strings.Contains(stderr, missing) {
		t.Errorf("the failure must name the image and why:\n%s", stderr)
	}
	if _, ok := localImageID(cli, ref); !ok {
		t.Errorf("one failure stopped the other pulls:\n%s", stderr)
	}
}

func TestImagesSaveLoadThenRunWithTheRegistryStopped(t *testing.T) {
	cli := imagesEngine(t)
	reg := startOCIRegistry(t)
	repo := reg.Addr + "/pml-e2e-" + imgNonce(t) + "/probe"
	ref := repo + ":v1"
	// The probe MCP server, so that the loaded image is run by pml itself.
	probeImage(t)
	id := importTestImage(t, cli, ref, probeBin, map[string]string{"pml.image": "test"})
	digest := pushImage(t, cli, ref)
	removeTestImage(t, cli, id)

	cfg := fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q}}}`, repo+"@"+digest)
	ws := newWorkspace(t, cfg)
	man := writeImageManifest(t, "")
	if out, errOut, code := runImagesCmd(t, ws, "images", "pull", "--manifest", man); code != 0 {
		t.Fatalf("pull: exit %d\n%s\n%s", code, out, errOut)
	}
	bundle := filepath.Join(t.TempDir(), "bundle.tar")
	stdout, stderr, code := runImagesCmd(t, ws, "images", "save", "--manifest", man, "-o", bundle)
	if code != 0 {
		t.Fatalf("save: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "saved "+repo+"@"+digest) {
		t.Errorf("save output:\n%s", stdout)
	}

	reg.stop()
	removeTestImage(t, cli, id)
	if _, ok := localImageID(cli, id); ok {
		t.Fatal("the image is still there")
	}

	// A corrupted copy is refused, naming the file, and loads nothing.
	data, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	corrupt := filepath.Join(t.TempDir(), "corrupt.tar")
	if err := os.WriteFile(corrupt, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runImagesCmd(t, ws, "images", "load", "-i", corrupt)
	if code == 0 || !strings.Contains(stderr, "images.tar") || !strings.Contains(stderr, "nothing was loaded") {
		t.Errorf("a corrupted bundle: exit %d\n%s", code, stderr)
	}
	if _, ok := localImageID(cli, id); ok {
		t.Fatal("a corrupted bundle loaded the image")
	}

	stdout, stderr, code = runImagesCmd(t, ws, "images", "load", "-i", bundle)
	if code != 0 {
		t.Fatalf("load: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if got, ok := localImageID(cli, id); !ok || got != id {
		t.Fatalf("after the load: %q", got)
	}
	stdout, _, _ = runImagesCmd(t, ws, "images", "list", "--manifest", man, "--json")
	var rows []struct {
		Image   string `json:"image"`
		Present bool   `json:"present"`
		Status  string `json:"status"`
	}
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("list --json: %v\n%s", err, stdout)
	}
	found := false
	for _, r := range rows {
		if r.Image == repo+"@"+digest {
			found = r.Present && strings.Contains(r.Status, "loaded")
		}
	}
	if !found {
		t.Errorf("list does not show the loaded image as present: %s", stdout)
	}

	// pml runs the server from its pinned reference, the registry stopped.
	s := startSession(t, ws)
	out, res := s.call(t, "probe:echo", map[string]any{"text": "offline"})
	if res.IsError || out != "offline" {
		t.Fatalf("probe:echo after the load: %q\nstderr:\n%s", out, s.stderr.String())
	}
}

// TestImagesPruneKeepsWhatAnotherProjectUses: two projects pull their
// servers' images through pml; the second then drops one. Prune in the
// first removes only that one: the second's image stays although the
// first does not use it, and images pml never pulled or built (whatever
// their labels) are never listed.
func TestImagesPruneKeepsWhatAnotherProjectUses(t *testing.T) {
	cli := imagesEngine(t)
	reg := startOCIRegistry(t)
	prefix := reg.Addr + "/pml-e2e-prune-" + imgNonce(t) + "/"
	ids := map[string]string{}
	for _, n := range []string{"a", "b", "c"} {
		ref := prefix + n + ":1"
		id := importTestImage(t, cli, ref, "", nil)
		pushImage(t, cli, ref)
		removeTestImage(t, cli, id) // pml pulls it
		ids[n] = id
	}
	foreign := importTestImage(t, cli, prefix+"foreign:1", "", nil)
	testLabel := importTestImage(t, cli, prefix+"labelled:1", "", map[string]string{"pml.image": "test"})
	man := writeImageManifest(t, "") // only the projects' own images: the engine is shared
	server := func(names ...string) string {
		var parts []string
		for _, n := range names {
			parts = append(parts, fmt.Sprintf(`%q: {"image": %q, "command": "/x"}`, n, prefix+n+":1"))
		}
		return `{"mcps": {` + strings.Join(parts, ", ") + `}}`
	}
	wsA := newWorkspace(t, server("a"))
	wsB := newWorkspace(t, server("b", "c"))
	for _, ws := range []*workspace{wsA, wsB} {
		if out, errOut, code := runImagesCmd(t, ws, "images", "pull", "--manifest", man); code != 0 {
			t.Fatalf("pull: exit %d\n%s\n%s", code, out, errOut)
		}
	}
	for n, id := range ids {
		if _, ok := localImageID(cli, prefix+n+":1"); !ok {
			t.Fatalf("%s was not pulled (%s)", n, id)
		}
	}
	wsB.write(".pml.json", server("b")) // c is no longer used

	stdout, stderr, code := runImagesCmd(t, wsA, "images", "prune", "--manifest", man, "--dry-run")
	if code != 0 {
		t.Fatalf("prune --dry-run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// An image's names start with its digest reference (name@sha256:…).
	if !strings.Contains(stdout, "would remove "+prefix+"c@") || !strings.Contains(stdout, prefix+"c:1") || !strings.Contains(stdout, "pulled or loaded by pml for "+wsB.Dir) {
		t.Errorf("dry run does not list c with why:\n%s", stdout)
	}
	for _, never := range []string{prefix + "a:", prefix + "a@", prefix + "b:", prefix + "b@", prefix + "foreign:", prefix + "labelled:"} {
		if strings.Contains(stdout, never) {
			t.Errorf("dry run lists %s:\n%s", never, stdout)
		}
	}
	if !strings.Contains(stderr, wsA.Dir) || !strings.Contains(stderr, wsB.Dir) {
		t.Errorf("prune does not say which projects it considered:\n%s", stderr)
	}
	if _, ok := localImageID(cli, prefix+"c:1"); !ok {
		t.Fatal("--dry-run removed c")
	}

	// For real, limited to this test's images (the host is shared).
	stdout, stderr, code = runImagesCmd(t, wsA, "images", "prune", "--manifest", man, "--repo", prefix)
	if code != 0 {
		t.Fatalf("prune: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "removed "+prefix+"c@") || strings.Count(stdout, "removed ") != 1 {
		t.Errorf("prune output:\n%s", stdout)
	}
	for ref, wantPresent := range map[string]bool{prefix + "a:1": true, prefix + "b:1": true, prefix + "c:1": false} {
		if _, ok := localImageID(cli, ref); ok != wantPresent {
			t.Errorf("%s present=%v after prune, want %v\n%s", ref, ok, wantPresent, stdout)
		}
	}
	for _, id := range []string{foreign, testLabel} {
		if _, ok := localImageID(cli, id); !ok {
			t.Errorf("prune removed %s, an image pml never pulled or built", id)
		}
	}

	// A known project that cannot be read stops prune: its images cannot
	// be told. Once its directory is gone, it keeps nothing and is named.
	wsC := newWorkspace(t, `{"mcps": {}}`)
	if out, errOut, code := runImagesCmd(t, wsC, "images", "pull", "--manifest", man); code != 0 {
		t.Fatalf("pull in C: exit %d\n%s\n%s", code, out, errOut)
	}
	if err := os.WriteFile(wsC.path(".pml.json"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runImagesCmd(t, wsA, "images", "prune", "--manifest", man, "--dry-run", "--repo", prefix)
	if code != 1 || !strings.Contains(stderr, "cannot tell which images the project "+wsC.Dir+" uses") || !strings.Contains(stderr, "nothing was removed") {
		t.Errorf("prune with an unreadable project: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if err := os.RemoveAll(wsC.Dir); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runImagesCmd(t, wsA, "images", "prune", "--manifest", man, "--dry-run", "--repo", prefix)
	if code != 0 || !strings.Contains(stderr, "projects whose directory is gone no longer keep images: ") || !strings.Contains(stderr, wsC.Dir) {
		t.Errorf("prune after a project's directory went: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, n := range []string{"a", "b"} {
		if id, ok := localImageID(cli, prefix+n+":1"); ok {
			removeTestImage(t, cli, id)
		}
	}
}

// TestSaveRefusesAProjectWhoseDependenciesAreNotInstalled: the offline
// host would have to install them, so save says so and writes nothing.
func TestSaveRefusesAProjectWhoseDependenciesAreNotInstalled(t *testing.T) {
	ws := newWorkspace(t, npmMemoryConfig(npmMemoryIntegrity))
	out := filepath.Join(t.TempDir(), "b.tar.zst")
	stdout, stderr, code := runImagesCmd(t, ws, "images", "save", "--manifest", writeImageManifest(t, ""), "-o", out)
	if code != 1 || !strings.Contains(stderr, "the dependencies of memory are not installed here") || !strings.Contains(stderr, "pml images pull") || !strings.Contains(stderr, "nothing was written") {
		t.Errorf("save: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused save wrote the bundle")
	}
}
