package doctor

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/docker"
	"github.com/pml-dev/pml/internal/inside"
)

// checkInside reports pml's in-container program for the daemon's
// architecture (embedded in this pml, cmd/pml-inside) and the toolbox
// image built from it.
func checkInside(ctx context.Context, rt *docker.Runtime) []Check {
	src := inside.NewSource(rt)
	p, err := src.Program(ctx)
	if err != nil {
		fix := ""
		if errors.Is(err, inside.ErrMissing) {
			fix = "reinstall pml from a release (docs/install.md); from source, `make build` builds the in-container programs, then pml"
		}
		return []Check{{"fail", "in-container", err.Error() + fmt.Sprintf(" (this pml carries it for: %s)", embeddedList()), fix}}
	}
	out := []Check{{"ok", "in-container", fmt.Sprintf("pml-inside for linux/%s (%.1f MB) at %s", p.Arch, float64(p.Size)/1e6, p.Path), ""}}
	// Mounted from this machine into shell:exec's containers and
	// servers' shims: an engine that does not see it cannot run it.
	if s, err := rt.Scope(ctx); err == nil {
		if err := s.Check(p.Path); err != nil {
			out[0] = Check{"fail", "in-container", fmt.Sprintf("pml-inside for linux/%s at %s, which the engine cannot see: %s", p.Arch, p.Path, s.Describe()),
				"set PML_CACHE_DIR to a directory the engine shares (pml keeps its in-container program there), or " + s.Advice}
		}
	}
	tb := &images.Toolbox{Runtime: rt, Program: src.Program}
	ref, err := tb.Ref(ctx)
	if err != nil {
		return append(out, Check{"fail", "toolbox image", err.Error(), ""})
	}
	switch ok, err := rt.ImageExists(ctx, ref); {
	case err != nil:
		out = append(out, Check{"fail", "toolbox image", err.Error(), ""})
	case ok:
		out = append(out, Check{"ok", "toolbox image", ref + " present", ""})
	default:
		out = append(out, Check{"warn", "toolbox image", ref + " missing; pml builds it from its in-container program on the first call (about a second, no registry)", "pml images build"})
	}
	return out
}

func embeddedList() string {
	var l []string
	for _, a := range inside.Embedded() {
		l = append(l, "linux/"+a)
	}
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}
