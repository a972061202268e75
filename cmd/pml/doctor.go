package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/docker"
	"github.com/pml-dev/pml/internal/workspace"
)

// check is one line of `pml doctor`.
type check struct {
	status string // "ok", "warn", "fail"
	name   string
	detail string
	fix    string
}

func newDoctorCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check that pml can run here, with a fix for each problem",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			checks := doctor(cmd.Context())
			failed := printChecks(cmd.OutOrStdout(), checks)
			if failed > 0 {
				return &exitError{1, fmt.Errorf("%d check(s) failed", failed)}
			}
			return nil
		},
	}
}

func doctor(ctx context.Context) []check {
	var out []check
	add := func(c check) { out = append(out, c) }

	cwd, _ := os.Getwd()
	ws, err := workspace.Resolve(os.Getenv, cwd)
	if err != nil {
		add(check{"fail", "workspace", err.Error(), "set PML_WORKSPACE to an existing directory"})
		return out
	}
	if ws.Warning != "" {
		add(check{"warn", "workspace", ws.Dir + " (no project marker found)", "set PML_WORKSPACE, or run pml inside a project"})
	} else {
		add(check{"ok", "workspace", fmt.Sprintf("%s (from %s)", ws.Dir, ws.Source), ""})
	}
	cfg, err := config.Load(ws.Dir, os.Getenv)
	switch {
	case err != nil:
		add(check{"fail", "config", err.Error(), "fix .pml.json as the message says"})
	case !cfg.Exists:
		add(check{"ok", "config", "no .pml.json: built-in permissions (read tools allowed, write and shell tools asked)", ""})
	case len(cfg.Warnings) > 0:
		for _, w := range cfg.Warnings {
			add(check{"warn", "config", w, "remove or correct the key"})
		}
	default:
		add(check{"ok", "config", cfg.Path + " is valid", ""})
	}

	rt, err := docker.New()
	if err != nil {
		add(check{"fail", "docker", err.Error(), "check DOCKER_HOST"})
		return out
	}
	defer rt.Close()
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := rt.Info(ictx)
	if err != nil {
		add(check{"fail", "docker", err.Error(), "start the daemon: make docker (or sudo systemctl start docker)"})
		return out
	}
	add(check{"ok", "docker", fmt.Sprintf("Engine %s at %s, API %s", info.ServerVersion, info.Endpoint, info.APIVersion), ""})
	if info.Remote {
		add(check{"fail", "docker host", fmt.Sprintf("%s is a remote daemon: bind mounts name the daemon's filesystem, so the workspace %s is not there and tools would see an empty directory", info.Endpoint, ws.Dir), "run pml on the Docker host itself, or unset DOCKER_HOST"})
	}
	if info.SeccompSupported {
		add(check{"ok", "seccomp", "the daemon applies its default seccomp profile to pml's containers", ""})
	} else {
		add(check{"warn", "seccomp", "the daemon reports no seccomp support: containers run without a syscall filter (capabilities, no-new-privileges, read-only rootfs and network none still apply)", "use a kernel and Docker build with seccomp enabled"})
	}
	exe, _ := os.Executable()
	tb := &images.Toolbox{Runtime: rt, Exe: exe}
	if ref, err := tb.Ref(); err != nil {
		add(check{"fail", "toolbox image", err.Error(), ""})
	} else if ok, err := rt.ImageExists(ictx, ref); err != nil {
		add(check{"fail", "toolbox image", err.Error(), ""})
	} else if ok {
		add(check{"ok", "toolbox image", ref + " present", ""})
	} else if serr := images.CheckStatic(exe); serr != nil {
		add(check{"fail", "toolbox image", ref + " missing and this pml cannot build it: " + serr.Error(), "make build && bin/pml images build"})
	} else {
		add(check{"warn", "toolbox image", ref + " missing; pml builds it from its own executable on the first call (about a second)", "pml images build"})
	}
	shell := config.DefaultShellImage
	if cfg != nil {
		shell = cfg.Sandbox.ShellImage
	}
	if ok, err := rt.ImageExists(ictx, shell); err != nil {
		add(check{"fail", "shell image", err.Error(), ""})
	} else if ok {
		add(check{"ok", "shell image", shell + " present", ""})
	} else {
		add(check{"fail", "shell image", shell + " missing: shell:exec cannot run", "make images (builds it from Debian's busybox-static)"})
	}
	return out
}

func printChecks(w io.Writer, checks []check) (failed int) {
	marks := map[string]string{"ok": "ok  ", "warn": "warn", "fail": "FAIL"}
	for _, c := range checks {
		fmt.Fprintf(w, "[%s] %-14s %s\n", marks[c.status], c.name, c.detail)
		if c.fix != "" && c.status != "ok" {
			fmt.Fprintf(w, "       %-14s fix: %s\n", "", c.fix)
		}
		if c.status == "fail" {
			failed++
		}
	}
	return failed
}
