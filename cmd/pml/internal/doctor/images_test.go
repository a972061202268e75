package doctor

import (
	"strings"
	"testing"

	"github.com/pml-dev/pml/images"
)

func TestDoctorSaysHowEachHostGetsTheImagesBuiltFromHostFiles(t *testing.T) {
	man, err := images.LoadManifest("")
	if err != nil {
		t.Fatal(err)
	}
	pinned := map[string]images.Pinned{}
	for _, p := range man.Images {
		pinned[p.Name] = p
	}
	debian := hostFacts{goos: "linux", arch: "amd64", daemonArch: "amd64", busybox: true, apt: true, npm: true, debootstrapd: true}
	debian.sourceTree = true
	release := debian
	release.sourceTree = false
	noBusybox := debian
	noBusybox.busybox, noBusybox.apt = false, false
	mac := hostFacts{goos: "darwin", arch: "arm64", daemonArch: "arm64"}
	arm := hostFacts{goos: "linux", arch: "arm64", daemonArch: "arm64", busybox: true, apt: true, npm: true, debootstrapd: true}
	remote := debian
	remote.remote = true
	for _, c := range []struct {
		name, image string
		h           hostFacts
		how, cmd    string
	}{
		{"Debian", "shell", debian, "build", "pml images build --busybox /bin/busybox"},
		{"Debian", "node", debian, "build", "make images-node"},
		{"Debian", "deno", debian, "build", "make images-deno"},
		// A release install has no source tree to run make in.
		{"Debian, a release install", "node", release, "pull", "pml images pull (once .pml.json uses pml/node:18)"},
		{"Debian, a release install", "deno", release, "pull", "pml images pull (once the project runs code"},
		{"Debian, a release install", "shell", release, "build", "pml images build --busybox /bin/busybox"},
		{"Linux without busybox or apt", "shell", noBusybox, "pull", "pml images pull (pulls busybox:1.36.1-musl@sha256:"},
		{"macOS", "shell", mac, "pull", "tags it pml/shell:busybox"},
		{"macOS", "node", mac, "pull", "docker pull node@sha256:f9ab18e354e6855ae56ef2b290dd225c1e51a564f87584b9bd21dd651838830e && docker tag node@sha256:f9ab18e354e6855ae56ef2b290dd225c1e51a564f87584b9bd21dd651838830e pml/node:18"},
		{"macOS", "deno", mac, "pull", "pml images pull (once the project runs code or has an API key, or with --all), or now: docker pull denoland/deno@sha256:"},
		{"arm64 Linux", "deno", arm, "pull", "denoland/deno"},
		{"arm64 Linux", "shell", arm, "build", "--busybox"},
		{"a remote engine", "shell", remote, "pull", "busybox"},
	} {
		r := imageRoute(pinned[c.image], c.h)
		if r.how != c.how || !strings.Contains(r.command, c.cmd) {
			t.Errorf("%s, %s: %+v, want %s with %q", c.name, c.image, r, c.how, c.cmd)
		}
		if r.how != "build" && r.why == "" {
			t.Errorf("%s, %s: no reason it is not built", c.name, c.image)
		}
	}
	// An image with no pinned copy, not buildable here: a bundle.
	p := pinned["shell"]
	p.Pull = ""
	if r := imageRoute(p, mac); r.how != "load" || !strings.Contains(r.command, "pml images load -i") {
		t.Errorf("no pin on macOS: %+v", r)
	}
}
