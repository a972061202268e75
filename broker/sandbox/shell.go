package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/egress/inside"
	"github.com/pml-dev/pml/internal/pathguard"
	"github.com/pml-dev/pml/internal/supervise"
	"github.com/pml-dev/pml/internal/toolbox"
)

// ShellTool is shell:exec, which ShellExec runs.
var ShellTool = toolbox.Tool{
	Name: "shell:exec",
	Description: "Run a shell command (/bin/sh -c) inside a disposable container with the workspace mounted " +
		"read-write at its own path and no network (only the hosts sandbox.network.allow names, through pml's proxy). Returns stdout, stderr and the exit code.",
	InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "The command line, run with /bin/sh -c."},
    "cwd": {"type": "string", "description": "Working directory inside the workspace (absolute or workspace-relative). Defaults to the workspace root."},
    "timeout_ms": {"type": "integer", "minimum": 1, "description": "Kill the command after this many milliseconds (at most sandbox.timeout)."}
  },
  "required": ["command"]
}`),
	PathArgs:    []string{"cwd"},
	Writes:      true,
	Title:       "Run shell command",
	Annotations: toolbox.Hints("Run shell command", false, true, false),
}

// shellEntry is the shell container's own program. The working directory
// (first line) and the command (the rest, byte for byte) arrive on stdin,
// so the container can be started before the call is known: it comes
// pre-started from the pool. The command then runs exactly as if it had
// been the container's command: `/bin/sh -c COMMAND` in that directory,
// stdin at EOF, none of these variables in its environment. Only shell
// built-ins are used, so any image with a POSIX /bin/sh works.
const shellEntry = `IFS= read -r dir || exit 125
cmd=
while IFS= read -r line; do cmd="$cmd$line
"; done
cmd="$cmd$line"
cd "$dir" 2>/dev/null || { echo "pml: cannot enter the working directory $dir" >&2; exit 125; }
exec /bin/sh -c "$cmd" </dev/null`

// ShellOutput is the structured result of shell:exec.
type ShellOutput struct {
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	ExitCode  int    `json:"exit_code"`
	Truncated bool   `json:"truncated,omitempty"`
}

// deadlineMargin is how long a container's own deadline runs past its
// call's: pml's timeout (with its clear message) comes first, the
// container's is for when pml cannot act.
const deadlineMargin = 2 * time.Second

// ShellExec runs shell:exec: each command in a single-use container of
// the shell image (sandbox.shell_image), pml's supervisor as its PID 1
// when it can be.
type ShellExec struct {
	sb    *Sandbox
	image string
}

// NewShellExec is shell:exec's executor on sb, in image.
func NewShellExec(sb *Sandbox, image string) ShellExec {
	return ShellExec{sb: sb, image: image}
}

func (e ShellExec) Run(ctx context.Context, _ *call.Call, def toolbox.Tool, args map[string]any) call.Result {
	command, ok := args["command"].(string)
	if !ok || strings.TrimSpace(command) == "" {
		return call.ResultFor(fmt.Errorf("%w: shell:exec needs the argument \"command\" (a non-empty string)", call.ErrInvalidInput))
	}
	cwd, refused := e.cwd(def, args)
	if refused != nil {
		return *refused
	}
	limit, err := e.timeout(args)
	if err != nil {
		return call.ResultFor(err)
	}
	// What is asked of the engine before the container runs counts
	// against the call's limit too.
	pctx, cancel := limit.within(ctx)
	defer cancel()
	spec, err := e.spec(pctx)
	if err != nil {
		return beforeContainer(ctx, pctx, limit, err)
	}
	stdin := []byte(cwd + "\n" + command)
	if exe := e.sb.Supervisor(pctx); exe != "" {
		// pml's in-container program at PID 1 gives the container a deadline of
		// its own (internal/supervise): it ends even when pml cannot
		// kill it (pml killed, or the daemon connection lost).
		spec.Entrypoint = []string{supervise.Binary, supervise.Subcommand}
		spec.Mounts = append(spec.Mounts, container.Mount{Source: exe, Target: supervise.Binary, ReadOnly: true})
		stdin = supervise.Request(limit.d+deadlineMargin, cwd, command)
	}
	// sandbox.network: the supervisor runs the egress listener beside the
	// command (sandbox/egress.go); without it there is no way out at all.
	var noNetwork string
	boxed := false
	if rules := *e.sb.Egress.Shell.Load(); !rules.Empty() {
		if why := e.sb.EgressUnreachable(pctx, spec.Image); why != "" {
			// The engine's egress container serves it instead, where
			// the runtime runs one.
			boxed = e.sb.Egress.Boxed()
			if !boxed {
				noNetwork = NoNetworkNote("shell:exec", "sandbox.network.allow", why)
				e.sb.Log.Warn().Str("tool", "shell:exec").Msg(noNetwork)
			}
		}
	}
	if rules := *e.sb.Egress.Shell.Load(); !rules.Empty() && noNetwork == "" {
		if exe := e.sb.Supervisor(pctx); exe == "" {
			return call.ResultFor(fmt.Errorf("%w: sandbox.network needs pml's supervisor in the shell container, and pml's in-container program is missing from this pml; reinstall pml from a release (docs/install.md), or build it from source with `make build`; nothing ran", call.ErrUnavailable))
		}
		if boxed {
			e.sb.Egress.GiveBoxed(&spec, ShellEgressID, "shell:exec", "sandbox.network.allow", rules)
		} else if err := e.sb.Egress.Give(&spec, ShellEgressID, "shell:exec", "sandbox.network.allow", rules); err != nil {
			return call.ResultFor(fmt.Errorf("%w: %w", call.ErrUnavailable, err))
		}
		spec.Entrypoint = append(spec.Entrypoint, inside.Flag, spec.Egress)
		if boxed {
			// The supervisor runs the listener: the runtime must not
			// wrap the command in another.
			spec.Egress = ""
		}
	}
	res, failure := e.sb.run(ctx, spec, container.Request{Stdin: stdin, Limit: e.sb.Policy().OutputLimit}, limit)
	out := ShellOutput{Stdout: string(res.Stdout), Stderr: string(res.Stderr), ExitCode: res.Exit.Code, Truncated: res.Truncated}
	if failure != nil {
		// Keep what the command printed before it was stopped.
		failure.Structured = out
		if out.Stdout != "" || out.Stderr != "" {
			failure.Text += "\n" + formatShell(out)
		}
		return *failure
	}
	text := formatShell(out)
	if out.ExitCode != 0 && e.sb.Egress.Shell.Load().Empty() && networkFailure(out.Stdout+out.Stderr) {
		text += isolatedNote
	}
	if noNetwork != "" {
		text += "note: " + noNetwork + "\n"
	}
	return call.Result{Text: text, Structured: out, IsError: out.ExitCode != 0, Degraded: noNetwork}
}

// isolatedNote follows a failed command whose output says it could not
// reach the network, in a container pml gave none: what the person and
// the model see otherwise is "Network is unreachable" or "bad address",
// which reads like an outage rather than a rule.
const isolatedNote = "note: shell:exec runs with no network on purpose (pml isolates tools from your network and the internet). " +
	"To let it reach a host, add the host to sandbox.network.allow in .pml.json " +
	"(e.g. {\"sandbox\": {\"network\": {\"allow\": [\"example.com\"]}}}) and run `pml trust`; docs/network.md says more.\n"

// networkSigns are what common clients print when a name cannot be
// resolved or no route exists (busybox wget, curl, Node, Python, git,
// getaddrinfo).
var networkSigns = []string{
	"network is unreachable", "bad address", "could not resolve host", "temporary failure in name resolution",
	"name or service not known", "getaddrinfo", "enotfound", "eai_again", "no address associated with hostname",
	"could not resolve hostname", "nodename nor servname",
}

func networkFailure(output string) bool {
	low := strings.ToLower(output)
	for _, s := range networkSigns {
		if strings.Contains(low, s) {
			return true
		}
	}
	return false
}

// cwd checks the optional cwd argument: an existing directory in the
// workspace (the workspace itself when not given). A refusal is the
// result to return.
func (e ShellExec) cwd(def toolbox.Tool, args map[string]any) (string, *call.Result) {
	v, ok := args["cwd"]
	if !ok {
		return e.sb.Workspace, nil
	}
	fail := func(err error) (string, *call.Result) {
		r := call.ResultFor(err)
		return "", &r
	}
	s, ok := v.(string)
	if !ok {
		return fail(fmt.Errorf("%w: shell:exec: argument \"cwd\" must be a string", call.ErrInvalidInput))
	}
	p, err := pathguard.Resolve(e.sb.Workspace, s)
	if err != nil {
		r := call.ResultFor(pathError(def.Name, "cwd", err))
		r.Blocked = true
		return "", &r
	}
	if strings.ContainsRune(p, '\n') {
		return fail(fmt.Errorf("%w: shell:exec: the working directory %q contains a line break, which pml cannot pass to the shell; use a directory without one", call.ErrInvalidInput, p))
	}
	if st, err := os.Stat(p); err != nil || !st.IsDir() {
		return fail(fmt.Errorf("%w: shell:exec: the working directory %s is not an existing directory in the workspace; create it first (e.g. with filesystem:create_directory)", call.ErrInvalidInput, p))
	}
	return p, nil
}

// timeout is sandbox.timeout, or the shorter timeout_ms argument.
func (e ShellExec) timeout(args map[string]any) (callLimit, error) {
	limit := e.sb.policyLimit()
	if v, ok := args["timeout_ms"]; ok {
		ms, ok := v.(float64)
		if !ok || ms < 1 || ms != float64(int64(ms)) {
			return callLimit{}, fmt.Errorf("%w: shell:exec: argument \"timeout_ms\" must be a whole number of milliseconds ≥ 1", call.ErrInvalidInput)
		}
		if d := time.Duration(ms) * time.Millisecond; d < limit.d {
			limit.d, limit.arg = d, "timeout_ms"
		}
	}
	return limit, nil
}

// spec is the container of a shell:exec call, once its image is
// known to be there.
func (e ShellExec) spec(ctx context.Context) (container.Spec, error) {
	image := e.image
	if ok, err := e.sb.Runtime.ImageExists(ctx, image); err != nil {
		return container.Spec{}, fmt.Errorf("%w: %w", call.ErrUnavailable, err)
	} else if !ok && image == config.DefaultShellImage {
		return container.Spec{}, fmt.Errorf("%w: the shell image %s is not on this host (the container engine has no such image): run `pml images build` (it builds the shell image locally from a static busybox, Debian's busybox-static) or `pml images pull`, or set sandbox.shell_image in .pml.json to an image that has /bin/sh", call.ErrUnavailable, image)
	} else if !ok {
		// pml's commands build only its own shell image: this one is the
		// person's to get.
		return container.Spec{}, fmt.Errorf("%w: the shell image %s named by sandbox.shell_image is not on this host (the container engine has no such image): pull or build it (`pml images pull` pulls the images .pml.json names), or remove sandbox.shell_image to use pml's own %s", call.ErrUnavailable, image, config.DefaultShellImage)
	}
	extra, err := e.sb.Extra.Tool(false)
	if err != nil {
		return container.Spec{}, fmt.Errorf("%w: shell:exec: %w; nothing ran", call.ErrUnavailable, err)
	}
	return container.Spec{
		Image:      image,
		Entrypoint: []string{"/bin/sh", "-c", shellEntry},
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "PML_WORKSPACE=" + e.sb.Workspace},
		WorkingDir: e.sb.Workspace,
		User:       e.sb.User,
		Mounts:     append(e.sb.WorkspaceMounts(false), extra...),
		Policy:     e.sb.Policy(),
		Labels:     e.sb.Labels("pool:shell"),
	}, nil
}

func formatShell(o ShellOutput) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "exit code: %d\n", o.ExitCode)
	if o.Stdout != "" {
		sb.WriteString("stdout:\n" + o.Stdout)
		if !strings.HasSuffix(o.Stdout, "\n") {
			sb.WriteByte('\n')
		}
	}
	if o.Stderr != "" {
		sb.WriteString("stderr:\n" + o.Stderr)
		if !strings.HasSuffix(o.Stderr, "\n") {
			sb.WriteByte('\n')
		}
	}
	if o.Truncated {
		sb.WriteString("[output truncated: the output limit was reached and the command was stopped]\n")
	}
	return sb.String()
}
