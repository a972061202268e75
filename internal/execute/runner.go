package execute

import (
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/supervise"
	"github.com/pml-dev/pml/policies"
)

// DefaultImage is the Deno runtime built by images/deno/build.sh
// (`make images-deno`).
const DefaultImage = "pml/deno:2.9.6"

// Purpose is the pml.purpose label of the containers a Runner starts.
const Purpose = "execute"

// MaxCode bounds the program sent to the runner (code or module source).
const MaxCode = 16 << 20

//go:embed runner.ts
var runnerSource []byte

// runnerURL is the runner as Deno's main module (see the package doc for
// why it is not a file in the image).
var runnerURL = "data:application/typescript;base64," + base64.StdEncoding.EncodeToString(runnerSource)

// Runner starts runs. Its zero value is not usable: Runtime and User are
// required. A Runner is not modified by Start and may be shared.
type Runner struct {
	Runtime container.Runtime
	// Image defaults to DefaultImage. It must have deno on PATH (/bin or
	// /usr/bin), as pml/deno and denoland/deno do.
	Image string
	// Policy gives the resource limits (pids, memory, CPUs), the output
	// limit and the default timeout. Network "none", the read-only rootfs
	// and a tmpfs /tmp are enforced whatever it says.
	Policy policies.Policy
	// User is "uid:gid" and never root (see container.ChooseUser).
	User string
	// Labels are added to the container; the owner labels of this process
	// and pml.purpose=execute are filled in when missing, so a crashed pml's
	// runs are reaped like every other container.
	Labels map[string]string
	// Timeout bounds the whole run, from Start to Done, including time spent
	// waiting for answers (a paused approval). 0 means Policy.Timeout.
	Timeout time.Duration
	// Budget bounds the run's compute time: the time from Start to Done
	// not counting the stretches between Run.Pause and Run.Resume (waits
	// for a person). 0: only Timeout applies.
	Budget time.Duration
	// Supervisor is the host path of pml's static in-container program
	// (cmd/pml-inside, internal/inside), mounted
	// read-only as the container's PID 1 (internal/supervise.Link): the
	// container then ends at Lifetime after its start, or once pml's end of
	// its stdin is gone, even when pml cannot act (killed, engine lost).
	// "": Deno is PID 1 and only pml ends the run.
	Supervisor string
	// Lifetime is the supervisor's deadline, counted from the container's
	// start (a pre-started one waits in a pool first). 0: Timeout plus a
	// margin.
	Lifetime time.Duration
}

// Program is what a run executes: Code, or a function of Module.
type Program struct {
	// Code is the body of an async function with `mcp` in scope: it may
	// await and return a value.
	Code string
	// Module is an ES module's source (TypeScript); Export names the
	// exported function to call with Args. With Export empty the result is
	// the sorted list of the module's exported function names.
	Module string
	Export string
	Args   map[string]any
}

// Start runs code (the body of an async function) in a new container. ctx
// bounds the start only: the run lives until it is Done, killed or timed
// out, so that it can wait for answers across several requests.
func (r *Runner) Start(ctx context.Context, code string) (*Run, error) {
	return r.StartProgram(ctx, Program{Code: code})
}

// StartProgram is Start for any Program.
func (r *Runner) StartProgram(ctx context.Context, p Program) (*Run, error) {
	first, err := p.message()
	if err != nil {
		return nil, err
	}
	spec, err := r.spec()
	if err != nil {
		return nil, err
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = time.Duration(spec.Policy.Timeout)
	}
	if timeout <= 0 {
		timeout = time.Duration(policies.Default().Timeout)
	}
	run := newRun(spec.Policy.OutputLimit, timeout)
	run.budget = r.Budget
	mem, _ := spec.Policy.Resources.MemoryBytes()
	run.heapMiB = heapMiB(mem)
	proc, err := r.Runtime.Start(ctx, spec, container.Streams{Stdout: &stdoutWriter{run: run}, Stderr: &stderrWriter{run: run}})
	if err != nil {
		if errors.Is(err, container.ErrImageMissing) {
			return nil, fmt.Errorf("cannot run the code: the Deno image %s is not on this host; get it with `pml images pull --all` (--all includes the Deno image): %w", spec.Image, err)
		}
		return nil, fmt.Errorf("cannot run the code: starting its container: %w", err)
	}
	run.started(proc)
	if err := run.write(first); err != nil {
		run.Kill()
		return nil, fmt.Errorf("cannot run the code: sending it to the runner: %w", err)
	}
	return run, nil
}

// message is the first line sent to the runner.
func (p Program) message() ([]byte, error) {
	params := map[string]any{}
	switch {
	case p.Code != "" && p.Module != "":
		return nil, errors.New("a program is either code or a module, not both")
	case p.Code != "":
		if strings.TrimSpace(p.Code) == "" {
			return nil, errors.New("there is no code to run (the code is blank)")
		}
		params["code"] = p.Code
	case p.Module != "":
		params["module"] = p.Module
		if p.Export != "" {
			params["export"] = p.Export
		}
		if p.Args != nil {
			params["args"] = p.Args
		}
	default:
		return nil, errors.New("there is no code to run (empty code)")
	}
	if n := len(p.Code) + len(p.Module); n > MaxCode {
		return nil, fmt.Errorf("the code is %d bytes, more than the %d-byte limit", n, MaxCode)
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "pml/run", "params": params})
	if err != nil {
		return nil, fmt.Errorf("the program's arguments are not JSON: %w", err)
	}
	return append(b, '\n'), nil
}

// spec is the container of one run.
func (r *Runner) spec() (container.Spec, error) {
	if r.Runtime == nil {
		return container.Spec{}, errors.New("execute: Runner.Runtime is not set")
	}
	if err := checkUser(r.User); err != nil {
		return container.Spec{}, err
	}
	pol := r.Policy
	// Whatever the caller's policy, the code gets no network, no writable
	// rootfs and only the tmpfs Deno needs for its cache.
	pol.Network = "none"
	pol.ReadOnlyRootfs = true
	pol.NoNewPrivileges = true
	tmpfs := map[string]string{}
	for k, v := range pol.Tmpfs {
		tmpfs[k] = v
	}
	if _, ok := tmpfs["/tmp"]; !ok {
		tmpfs["/tmp"] = "rw,nosuid,nodev,mode=1777,size=64m"
	}
	pol.Tmpfs = tmpfs
	if err := pol.Validate(); err != nil {
		return container.Spec{}, err
	}
	mem, err := pol.Resources.MemoryBytes()
	if err != nil {
		return container.Spec{}, err
	}
	image := r.Image
	if image == "" {
		image = DefaultImage
	}
	args := []string{"run", "--no-prompt", "--no-remote", "--no-npm", "--no-config", "--no-lock"}
	if heap := heapMiB(mem); heap > 0 {
		args = append(args, "--v8-flags=--max-old-space-size="+strconv.FormatInt(heap, 10))
	}
	args = append(args, runnerURL)
	labels := container.Self().Labels()
	for k, v := range r.Labels {
		labels[k] = v
	}
	if labels[container.LabelPurpose] == "" {
		labels[container.LabelPurpose] = Purpose
	}
	entry := []string{"deno"}
	var mounts []container.Mount
	if r.Supervisor != "" {
		life := r.Lifetime
		if life <= 0 {
			life = r.Timeout + time.Minute
		}
		entry = supervise.LinkArgs(life, "deno")
		mounts = append(mounts, container.Mount{Source: r.Supervisor, Target: supervise.Binary, ReadOnly: true})
	}
	return container.Spec{
		Image:      image,
		Entrypoint: entry,
		Cmd:        args,
		Mounts:     mounts,
		// The complete environment: nothing of pml's reaches the code (and
		// Deno.env is denied anyway).
		Env: []string{
			"PATH=/bin:/usr/bin",
			"DENO_DIR=/tmp/deno",
			"DENO_NO_UPDATE_CHECK=1",
			"DENO_NO_PACKAGE_JSON=1",
			"NO_COLOR=1",
			"HOME=/tmp",
		},
		WorkingDir: "/tmp",
		User:       r.User,
		Policy:     pol,
		Labels:     labels,
	}, nil
}

// heapMiB is V8's old-space limit for a container of mem bytes (0: no
// limit). V8 stops at it with a clear "heap limit" message, before the
// kernel's OOM killer would end the container without one; the other
// quarter is Deno's own memory.
func heapMiB(mem int64) int64 {
	if mem <= 0 {
		return 0
	}
	return max(mem*3/4>>20, 16)
}

// checkUser refuses an empty user (the image default, which may be root)
// and uid 0.
func checkUser(u string) error {
	if u == "" {
		return errors.New("execute: no container user: refusing to run code as the image default (often root)")
	}
	uid, _, _ := strings.Cut(u, ":")
	if uid == "0" || uid == "root" {
		return fmt.Errorf("execute: refusing to run code as root (user %q); set sandbox.user to an unprivileged uid:gid", u)
	}
	return nil
}
