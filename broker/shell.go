package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/pathguard"
	"github.com/pml-dev/pml/internal/toolbox"
)

var shellTool = toolbox.Tool{
	Name: "shell:exec",
	Description: "Run a shell command (/bin/sh -c) inside a disposable container with the workspace mounted " +
		"read-write at its own path and no network. Returns stdout, stderr and the exit code.",
	InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "The command line, run with /bin/sh -c."},
    "cwd": {"type": "string", "description": "Working directory inside the workspace (absolute or workspace-relative). Defaults to the workspace root."},
    "timeout_ms": {"type": "integer", "minimum": 1, "description": "Kill the command after this many milliseconds (at most sandbox.timeout)."}
  },
  "required": ["command"]
}`),
	PathArgs: []string{"cwd"},
	Writes:   true,
}

// ShellOutput is the structured result of shell:exec.
type ShellOutput struct {
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	ExitCode  int    `json:"exit_code"`
	Truncated bool   `json:"truncated,omitempty"`
}

func (b *Broker) runShell(ctx context.Context, def toolbox.Tool, args map[string]any) Result {
	command, ok := args["command"].(string)
	if !ok || strings.TrimSpace(command) == "" {
		return errorResult(fmt.Errorf("%w: shell:exec needs the argument \"command\" (a non-empty string)", ErrInvalidInput))
	}
	cwd := b.ws
	if v, ok := args["cwd"]; ok {
		s, ok := v.(string)
		if !ok {
			return errorResult(fmt.Errorf("%w: shell:exec: argument \"cwd\" must be a string", ErrInvalidInput))
		}
		p, err := pathguard.Resolve(b.ws, s)
		if err != nil {
			r := errorResult(pathError(def.Name, "cwd", err))
			r.blocked = true
			return r
		}
		cwd = p
	}
	timeout := time.Duration(b.policy.Timeout)
	if v, ok := args["timeout_ms"]; ok {
		ms, ok := v.(float64)
		if !ok || ms < 1 || ms != float64(int64(ms)) {
			return errorResult(fmt.Errorf("%w: shell:exec: argument \"timeout_ms\" must be a whole number of milliseconds ≥ 1", ErrInvalidInput))
		}
		if d := time.Duration(ms) * time.Millisecond; d < timeout {
			timeout = d
		}
	}
	image := b.cfg.Sandbox.ShellImage
	if ok, err := b.rt.ImageExists(ctx, image); err != nil {
		return errorResult(fmt.Errorf("%w: %v", ErrUnavailable, err))
	} else if !ok {
		return errorResult(fmt.Errorf("%w: the shell image %s is not on this Docker host: run `make images` (builds it locally from Debian's busybox-static) or set sandbox.shell_image in .pml.json to an image that has /bin/sh", ErrUnavailable, image))
	}
	spec := container.Spec{
		Image:      image,
		Entrypoint: []string{"/bin/sh", "-c", command},
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "PML_WORKSPACE=" + b.ws},
		WorkingDir: cwd,
		User:       b.user,
		Mounts:     []container.Mount{{Source: b.ws, Target: b.ws}},
		Policy:     b.policy,
		Labels:     b.labels("tool:" + def.Name),
	}
	res, failure := b.run(ctx, spec, nil, timeout, b.policy.OutputLimit)
	out := ShellOutput{Stdout: string(res.Stdout), Stderr: string(res.Stderr), ExitCode: res.Exit.Code, Truncated: res.Truncated}
	if failure != nil {
		// Keep what the command printed before it was stopped.
		failure.Structured = out
		if out.Stdout != "" || out.Stderr != "" {
			failure.Text += "\n" + formatShell(out)
		}
		return *failure
	}
	return Result{Text: formatShell(out), Structured: out, IsError: out.ExitCode != 0}
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
