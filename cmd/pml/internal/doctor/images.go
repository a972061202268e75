package doctor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/docker"
	"github.com/pml-dev/pml/internal/inside"
)

// hostFacts is what decides how this host gets an image built elsewhere
// from host files (the shell, node and deno images).
type hostFacts struct {
	goos, arch   string // this machine
	daemonArch   string // the engine's (Go name), "" when unknown
	remote       bool   // the engine does not share this machine
	busybox      bool   // /bin/busybox is a static executable
	apt, npm     bool   // apt-get and npm are on PATH
	debootstrapd bool   // debootstrap is on PATH (or apt can install it)
	// sourceTree: pml's doctor runs in pml's source tree, whose make
	// targets build the node and deno images. A release install has no
	// such tree: there they are pulled by digest or loaded.
	sourceTree bool
}

func currentHost(info container.Info) hostFacts {
	has := func(cmd string) bool { _, err := exec.LookPath(cmd); return err == nil }
	arch, _ := inside.NormalizeArch(info.Architecture)
	h := hostFacts{goos: runtime.GOOS, arch: runtime.GOARCH, daemonArch: arch, remote: info.Remote,
		apt: has("apt-get"), npm: has("npm")}
	h.debootstrapd = has("debootstrap") || h.apt
	if _, err := os.Stat(filepath.Join("images", "node", "build.sh")); err == nil {
		h.sourceTree = true
	}
	if _, err := os.Stat("/bin/busybox"); err == nil && images.CheckStatic("/bin/busybox") == nil {
		h.busybox = true
	}
	return h
}

// route is how this host gets one missing image: the exact command, and
// the alternatives.
type route struct {
	how     string // "build", "pull" or "load"
	command string
	why     string // why it cannot be built here ("" when it can)
}

const loadHint = "pml images save -o pml-images.tar.zst on a host that has it, then here: pml images load -i pml-images.tar.zst"

// imageRoute decides, for a manifest image that is built from host files,
// whether this host builds it (the default, where it works), pulls its
// pinned copy by digest, or loads it from a bundle.
func imageRoute(p images.Pinned, h hostFacts) route {
	// Images built from this machine's files (busybox, glibc, debootstrap)
	// run only on a daemon that is this machine, of its architecture.
	why := ""
	switch {
	case h.goos != "linux":
		why = "pml runs on " + h.goos + ": the image is made of Linux files this host does not have"
	case h.remote:
		why = "the engine is not on this machine"
	case h.daemonArch != "" && h.daemonArch != h.arch:
		why = "the engine runs " + h.daemonArch + ", this machine " + h.arch
	}
	build := ""
	if why == "" {
		switch p.Name {
		case "shell":
			switch {
			case h.busybox:
				build = "pml images build --busybox /bin/busybox"
			case h.apt:
				build = "sudo apt-get install busybox-static && pml images build --busybox /bin/busybox"
			default:
				why = "no static busybox here (Debian's busybox-static)"
			}
		case "node":
			switch {
			case !h.sourceTree:
				why = "only pml's source tree builds it, and a release install has none"
			case h.debootstrapd:
				build = "make images-node (in pml's source tree)"
			default:
				why = "no debootstrap here"
			}
		case "deno":
			switch {
			case !h.sourceTree:
				why = "only pml's source tree builds it, and a release install has none"
			case h.arch != "amd64":
				why = "images/deno/build.sh builds the x86_64 image only"
			case !h.npm:
				why = "no npm here (deno comes from the npm registry)"
			default:
				build = "make images-deno (in pml's source tree)"
			}
		default:
			build = p.Build
		}
	}
	if build != "" {
		return route{how: "build", command: build}
	}
	if p.Pull != "" {
		cmd := "pml images pull (pulls " + p.Pull + " by digest and tags it " + p.Ref + ")"
		// The shell is named by sandbox.shell_image's default; node only
		// once a server uses it, so the engine's own commands are given.
		if p.Needed != images.NeededAlways && p.Name != "shell" {
			byDigest := p.Pull
			if r, err := images.ParseRef(p.Pull); err == nil {
				byDigest = r.Canonical(r.Digest)
			}
			when := "once .pml.json uses " + p.Ref
			if p.Needed == images.NeededCode {
				when = "once the project runs code or has an API key, or with --all"
			}
			cmd = "pml images pull (" + when + "), or now: docker pull " + byDigest + " && docker tag " + byDigest + " " + p.Ref
		}
		return route{how: "pull", command: cmd, why: why}
	}
	return route{how: "load", command: loadHint, why: why}
}

// checkLocalImages reports the shell, node and deno images: present, or
// how this host gets each (build, pull by digest, or load a bundle), with
// the exact command. shell is sandbox.shell_image.
func checkLocalImages(ctx context.Context, rt *docker.Runtime, info container.Info, shell string) []Check {
	man, err := images.LoadManifest(images.ManifestPath("", os.Getenv))
	if err != nil {
		return []Check{{"fail", "images", err.Error(), "fix the manifest named by " + images.ManifestEnv}}
	}
	h := currentHost(info)
	var out []Check
	for _, p := range man.Images {
		if p.Name != "shell" && p.Name != "node" && p.Name != "deno" {
			continue
		}
		name := p.Name + " image"
		ref := p.Ref
		if p.Name == "shell" && shell != "" {
			ref = shell
		}
		ok, err := rt.ImageExists(ctx, ref)
		switch {
		case err != nil:
			out = append(out, Check{"fail", name, err.Error(), ""})
			continue
		case ok:
			out = append(out, Check{"ok", name, ref + " present", ""})
			continue
		case ref != p.Ref:
			// A shell image of the user's own: pml cannot make it.
			out = append(out, Check{"fail", name, ref + " (sandbox.shell_image) missing: shell:exec cannot run", "docker pull " + ref + ", or set sandbox.shell_image back to " + p.Ref})
			continue
		}
		r := imageRoute(p, h)
		status, what := "warn", "missing"
		if p.Name == "shell" {
			status, what = "fail", "missing: shell:exec cannot run"
		}
		detail := fmt.Sprintf("%s %s; this host can %s it", ref, what, r.how)
		if r.why != "" {
			detail += " (not build: " + r.why + ")"
		}
		fix := r.command
		if r.how != "load" {
			fix += "; or " + loadHint
		}
		out = append(out, Check{status, name, detail, fix})
	}
	return out
}
