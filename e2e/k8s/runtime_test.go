//go:build linux && k8s

package k8s

// The Kubernetes runtime end to end: the real pml binary (PML_BIN) with
// runtime "kubernetes" against the test cluster (cluster.sh), each test in
// a namespace of its own, with the workspace on this machine (the node)
// mounted as hostPath. Images come from the local Docker engine and are
// loaded into the node with cluster.sh load.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pml-dev/pml/e2e/k8s/kapi"
)

// rtOwner owns the test workspaces: pods run as the workspace owner when
// pml runs as root.
const rtOwner = 1000

func rtKubeconfig(t testing.TB) string {
	if k := os.Getenv("KUBECONFIG"); k != "" {
		return k
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "pml", "k8s", "run", "kubeconfig")
}

func rtClient(t testing.TB) *kapi.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", rtKubeconfig(t))
	if err != nil {
		t.Fatalf("no test cluster (%v): start one with e2e/k8s/cluster.sh up, or run make test-k8s", err)
	}
	cs, err := kapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func rtPML(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("PML_BIN")
	if bin == "" {
		t.Fatal("PML_BIN is not set: make build, then PML_BIN=$PWD/bin/pml go test -tags k8s ./e2e/k8s/...")
	}
	return bin
}

// rtClusterSh is cluster.sh (PML_K8S_CLUSTER_SH overrides).
func rtClusterSh() string {
	if p := os.Getenv("PML_K8S_CLUSTER_SH"); p != "" {
		return p
	}
	p, _ := filepath.Abs("cluster.sh")
	return p
}

var (
	rtImagesOnce sync.Once
	rtProbeRef   string
	rtImagesErr  error
)

// rtImages builds pml's toolbox image for PML_BIN and the probe server's
// image with the local engine, and loads them and the shell image into
// the node.
func rtImages(t testing.TB) (probe string) {
	t.Helper()
	rtImagesOnce.Do(func() {
		out, err := exec.Command(rtPML(t), "images", "build").CombinedOutput()
		if err != nil {
			rtImagesErr = fmt.Errorf("pml images build: %v\n%s", err, out)
			return
		}
		var toolbox string
		for _, f := range strings.Fields(string(out)) {
			if strings.HasPrefix(f, "pml/toolbox:") {
				toolbox = f
			}
		}
		if toolbox == "" {
			rtImagesErr = fmt.Errorf("pml images build named no toolbox image:\n%s", out)
			return
		}
		rtProbeRef, rtImagesErr = rtBuildProbe()
		if rtImagesErr != nil {
			return
		}
		for _, ref := range []string{toolbox, "pml/shell:busybox", rtProbeRef} {
			if out, err := exec.Command("bash", rtClusterSh(), "load", ref).CombinedOutput(); err != nil {
				rtImagesErr = fmt.Errorf("loading %s into the cluster: %v\n%s", ref, err, out)
				return
			}
		}
	})
	if rtImagesErr != nil {
		t.Fatal(rtImagesErr)
	}
	return rtProbeRef
}

// rtBuildProbe builds e2e/testservers/probe into a FROM scratch image.
func rtBuildProbe() (string, error) {
	root, _ := filepath.Abs("../..")
	dir, err := os.MkdirTemp("", "pml-k8s-probe-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "probe")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./e2e/testservers/probe")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the probe server: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(bin)
	ref := fmt.Sprintf("pml-test/probe:%x", sha256.Sum256(b))[:len("pml-test/probe:")+12]
	df := "FROM scratch\nCOPY probe /probe\nLABEL pml.image=test\nENTRYPOINT [\"/probe\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return "", err
	}
	if out, err := exec.Command("docker", "build", "-q", "-t", ref, dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("docker build of the probe image: %v\n%s", err, out)
	}
	return ref, nil
}

// rtNamespace creates a namespace for one test; it is deleted (with every
// pod in it) at the end.
func rtNamespace(t testing.TB, cs *kapi.Client) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := "pml-e2e-rt-" + hex.EncodeToString(b)
	ctx := context.Background()
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"pml.e2e": "runtime"}}}
	if err := cs.Create(ctx, kapi.Namespaces, "", nsObj, nsObj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Delete(context.Background(), kapi.Namespaces, "", ns) })
	return ns
}

// rtWorkspace is a workspace owned by rtOwner with cfg as .pml.json, the
// runtime set to kubernetes in namespace ns.
func rtWorkspace(t testing.TB, ns, cfg string) string {
	t.Helper()
	dir := t.TempDir()
	var doc map[string]any
	if err := json.Unmarshal([]byte(cfg), &doc); err != nil {
		t.Fatal(err)
	}
	doc["runtime"] = "kubernetes"
	doc["kubernetes"] = map[string]any{"namespace": ns}
	b, _ := json.Marshal(doc)
	for name, content := range map[string][]byte{".pml.json": b, "hello.txt": []byte("hello from the host\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The temporary directory's parents must be traversable by the owner.
	_ = os.Chmod(filepath.Dir(dir), 0o755)
	_ = os.Chmod(dir, 0o755)
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, rtOwner, rtOwner)
	}); err != nil {
		t.Fatal(err)
	}
	// The person who wrote the policy trusts it (internal/trust).
	trust := exec.Command(rtPML(t), "trust", "--yes")
	trust.Dir, trust.Env = dir, rtEnv("PML_WORKSPACE="+dir)
	if out, err := trust.CombinedOutput(); err != nil {
		t.Fatalf("pml trust --yes: %v\n%s", err, out)
	}
	return dir
}

// rtState is the tests' own user state directory (pml's trust records),
// made once per test process.
var rtState = sync.OnceValue(func() string {
	d, err := os.MkdirTemp("", "pml-k8s-state-")
	if err != nil {
		panic(err)
	}
	return d
})

func rtEnv(extra ...string) []string {
	env := append(os.Environ(), "XDG_STATE_HOME="+rtState(), "KUBECONFIG="+os.Getenv("KUBECONFIG"))
	if os.Getenv("KUBECONFIG") == "" {
		home, _ := os.UserHomeDir()
		env = append(env, "KUBECONFIG="+filepath.Join(home, ".cache", "pml", "k8s", "run", "kubeconfig"))
	}
	return append(env, extra...)
}

type rtResult struct {
	Outcome    string          `json:"outcome"`
	ExitCode   int             `json:"exit_code"`
	IsError    bool            `json:"is_error"`
	Text       string          `json:"text"`
	Structured json.RawMessage `json:"structured"`
}

// rtCall runs pml call in ws.
func rtCall(t *testing.T, ws, tool, args string) rtResult {
	t.Helper()
	cmd := exec.Command(rtPML(t), "call", tool, args, "--log-level", "error", "--timeout", "3m")
	cmd.Dir = ws
	cmd.Env = rtEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	var r rtResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("pml call %s: stdout is not one JSON line (%v): %q\nstderr: %s", tool, err, stdout.String(), stderr.String())
	}
	return r
}

// rtPods lists the pods of namespace ns that are not going away.
func rtPods(t *testing.T, cs *kapi.Client, ns string) []corev1.Pod {
	t.Helper()
	var l corev1.PodList
	if err := cs.List(context.Background(), kapi.Pods, ns, &l); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// rtEventually polls cond for up to d.
func rtEventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func TestKubernetesFilesAndShell(t *testing.T) {
	rtImages(t)
	cs := rtClient(t)
	ns := rtNamespace(t, cs)
	ws := rtWorkspace(t, ns, `{"permissions": {"allow": ["*"]}}`)

	r := rtCall(t, ws, "filesystem:read_file", `{"path": "hello.txt"}`)
	if r.Outcome != "ok" || r.Text != "hello from the host\n" {
		t.Fatalf("read_file: %+v", r)
	}
	r = rtCall(t, ws, "filesystem:write_file", `{"path": "new.txt", "content": "from a pod"}`)
	if r.Outcome != "ok" {
		t.Fatalf("write_file: %+v", r)
	}
	p := filepath.Join(ws, "new.txt")
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "from a pod" {
		t.Fatalf("the written file: %q, %v", b, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil || st.Uid != rtOwner || st.Gid != rtOwner {
		t.Fatalf("the written file is owned by %d:%d, want the workspace owner %d:%d", st.Uid, st.Gid, rtOwner, rtOwner)
	}

	r = rtCall(t, ws, "shell:exec", `{"command": "id -u; id -g; cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' '; ls /var/run/secrets/kubernetes.io 2>&1 || true; echo from-shell > shell.txt"}`)
	var out struct {
		Stdout   string `json:"stdout"`
		ExitCode int    `json:"exit_code"`
	}
	if err := json.Unmarshal(r.Structured, &out); err != nil || r.Outcome != "ok" {
		t.Fatalf("shell:exec: %+v", r)
	}
	lines := strings.Split(strings.TrimSpace(out.Stdout), "\n")
	if len(lines) < 3 || lines[0] != "1000" || lines[1] != "1000" {
		t.Fatalf("shell:exec ran as %q, want uid and gid %d", out.Stdout, rtOwner)
	}
	var ifaces []string
	for _, l := range lines[2:] {
		if strings.Contains(l, "secrets") || strings.Contains(l, "No such file") {
			continue
		}
		ifaces = append(ifaces, l)
	}
	// A pod always has the CNI's interface: only lo, or an interface
	// under the deny-all NetworkPolicy that pml verified (doctor says so).
	if len(ifaces) > 1 {
		doc := exec.Command(rtPML(t), "doctor")
		doc.Dir, doc.Env = ws, rtEnv()
		rep, _ := doc.CombinedOutput()
		if !strings.Contains(string(rep), "network isolation") || !strings.Contains(string(rep), "is enforced") {
			t.Fatalf("the pod has interfaces %v and pml doctor does not report verified isolation:\n%s", ifaces, rep)
		}
	}
	if !strings.Contains(out.Stdout, "No such file") {
		t.Fatalf("the pod has a service-account directory: %q", out.Stdout)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "shell.txt")); string(b) != "from-shell\n" {
		t.Fatalf("the shell's file: %q", b)
	}
	rtEventually(t, 30*time.Second, "pods are left after the calls", func() bool { return len(rtPods(t, cs, ns)) == 0 })
}

// Approvals and audit as on Docker: a write that is asked for is not run
// by pml call (it exits 3 and says what to allow), a denied one never, and
// each call leaves one audit entry.
func TestKubernetesApprovalsAndAudit(t *testing.T) {
	rtImages(t)
	cs := rtClient(t)
	ns := rtNamespace(t, cs)
	ws := rtWorkspace(t, ns, `{"permissions": {"allow": ["filesystem:read_file"], "ask": ["filesystem:write_file"], "deny": ["shell:exec"]}}`)
	if r := rtCall(t, ws, "filesystem:write_file", `{"path": "x.txt", "content": "no"}`); r.ExitCode != 3 {
		t.Fatalf("an asked write: %+v, want exit 3 (needs approval)", r)
	}
	if _, err := os.Stat(filepath.Join(ws, "x.txt")); err == nil {
		t.Fatal("the write that needed approval was done")
	}
	if r := rtCall(t, ws, "shell:exec", `{"command": "true"}`); r.Outcome == "ok" {
		t.Fatalf("a denied shell ran: %+v", r)
	}
	if r := rtCall(t, ws, "filesystem:read_file", `{"path": "hello.txt"}`); r.Outcome != "ok" {
		t.Fatalf("an allowed read: %+v", r)
	}
	b, err := os.ReadFile(filepath.Join(ws, ".pml", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	entries := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(entries) != 3 {
		t.Fatalf("audit has %d entries, want one per call (3):\n%s", len(entries), b)
	}
	for i, tool := range []string{"filesystem:write_file", "shell:exec", "filesystem:read_file"} {
		if !strings.Contains(entries[i], `"`+tool+`"`) {
			t.Errorf("audit entry %d does not name %s: %s", i, tool, entries[i])
		}
	}
	if strings.Contains(string(b), `"no"`) {
		t.Error("the audit log holds an argument value")
	}
}

// rtSession is pml stdio in ws, as an MCP client sees it.
func rtSession(t *testing.T, ws string, env ...string) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(rtPML(t), "stdio")
	cmd.Dir, cmd.Env = ws, rtEnv(env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-k8s", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("pml stdio: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, cmd
}

func rtText(r *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

func TestKubernetesPooledServerConcurrentCalls(t *testing.T) {
	probe := rtImages(t)
	cs := rtClient(t)
	ns := rtNamespace(t, cs)
	ws := rtWorkspace(t, ns, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q}}}`, probe))
	s, _ := rtSession(t, ws)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprintf("call-%d", i)
			r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "probe__echo", Arguments: map[string]any{"text": want}})
			if err != nil {
				errs <- err
				return
			}
			if r.IsError || !strings.Contains(rtText(r), want) {
				errs <- fmt.Errorf("echo %s answered %q (error %v)", want, rtText(r), r.IsError)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "probe__whoami", Arguments: map[string]any{}})
	if err != nil || r.IsError || strings.Contains(rtText(r), "uid=0 ") || strings.Contains(rtText(r), `"uid":0`) {
		t.Fatalf("whoami: %v %v", rtText(r), err)
	}
	// One pod serves every call: the server is pooled.
	pods := rtPods(t, cs, ns)
	servers := 0
	for _, p := range pods {
		if strings.HasPrefix(p.Annotations["pml.label/pml.purpose"], "mcp:") {
			servers++
		}
	}
	if servers != 1 {
		t.Fatalf("%d server pods for %d concurrent calls, want 1", servers, n)
	}
	if err := s.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	rtEventually(t, 60*time.Second, "pods are left after the session", func() bool { return len(rtPods(t, cs, ns)) == 0 })
}

// A pml killed with SIGKILL cannot delete its pods: the next pml started
// in the workspace reaps them, and a pod nobody reaps ends by its own
// deadline (activeDeadlineSeconds).
func TestKubernetesKilledPmlPodsAreReaped(t *testing.T) {
	probe := rtImages(t)
	cs := rtClient(t)
	ns := rtNamespace(t, cs)
	ws := rtWorkspace(t, ns, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q}}}`, probe))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	serve := func(tool string, env ...string) *exec.Cmd {
		s, cmd := rtSession(t, ws, env...)
		if r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "x"}}); err != nil || r.IsError {
			t.Fatalf("%s: %v", tool, err)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_, _ = cmd.Process.Wait()
		return cmd
	}
	serve("probe__echo")
	if len(rtPods(t, cs, ns)) == 0 {
		t.Fatal("no pod outlived the killed pml: the test proves nothing")
	}
	if r := rtCall(t, ws, "filesystem:read_file", `{"path": "hello.txt"}`); r.Outcome != "ok" {
		t.Fatalf("the next pml's call: %+v", r)
	}
	rtEventually(t, 60*time.Second, "the killed pml's pods were not reaped by the next pml", func() bool { return len(rtPods(t, cs, ns)) == 0 })

	// Nobody reaps this time, and the server stays after its stdin ended
	// (a killed pml's attach ends it for a well-behaved server): the
	// pod's own deadline ends it.
	serve("probe__linger", "PML_KUBERNETES_POD_DEADLINE=15s")
	pods := rtPods(t, cs, ns)
	if len(pods) == 0 || pods[0].Spec.ActiveDeadlineSeconds == nil || *pods[0].Spec.ActiveDeadlineSeconds != 15 {
		t.Fatalf("the server pod has no 15 s deadline (%d pods)", len(pods))
	}
	name := pods[0].Name
	rtEventually(t, 3*time.Minute, "the pod did not end by its deadline (the kubelet checks it on its resync, about every minute)", func() bool {
		var p corev1.Pod
		err := cs.Get(ctx, kapi.Pods, ns, name, &p)
		return err == nil && p.Status.Phase == corev1.PodFailed && p.Status.Reason == "DeadlineExceeded"
	})
}
