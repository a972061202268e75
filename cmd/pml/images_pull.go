package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/broker"
	"github.com/pml-dev/pml/broker/permit"
	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/docker"
	"github.com/pml-dev/pml/internal/projects"
	"github.com/pml-dev/pml/internal/trust"
	"github.com/pml-dev/pml/internal/workspace"
)

// Pulling images: pml images pull (with the dependencies it pre-installs
// through the broker), the first-use pull a container start makes, and
// the record of which projects pml serves and which images it pulled,
// that pml images prune reads.

// firstUsePull is broker.Options.PullImage for a Docker engine: an image a
// container needs and the engine lacks is pulled as `pml images pull`
// pulls it (the same Puller: the manifest's and the lockfile's digest
// pins, retries, progress on stderr as g.progressOut says: bars on a
// terminal, else a line per step in the log's format), when pml knows it: the image manifest, .pml.json's servers
// and sandbox.shell_image, and .pml/mcp.lock's stdio entries name it.
// Other runtimes (Kubernetes: the nodes pull) get nil.
func firstUsePull(g *globals, rt container.Runtime, ws string, cfg *config.Config) func(context.Context, string) error {
	d, ok := rt.(*docker.Runtime)
	if !ok {
		return nil
	}
	return func(ctx context.Context, ref string) error {
		man, err := images.LoadManifest(images.ManifestPath("", os.Getenv))
		if err != nil {
			return err
		}
		locked, _, err := images.LockfileImages(ws)
		if err != nil {
			return err
		}
		cfg := currentConfig(ws, cfg)
		tb := &images.Toolbox{Runtime: d, Program: insideSource(d).Program}
		wants, err := images.Collect(images.Sources{
			Manifest: man,
			ExeTag: func() (string, error) {
				r, err := tb.Ref(ctx)
				// The tag follows the last colon (a registry host may have a port).
				return r[strings.LastIndex(r, ":")+1:], err
			},
			Servers:    cfg.Servers,
			ShellImage: cfg.Sandbox.ShellImage,
			Lockfile:   locked,
		})
		if err != nil {
			return err
		}
		w, ok := wantFor(wants, ref)
		if !ok {
			return fmt.Errorf("pml has no source for it: neither the image manifest, .pml.json nor .pml/mcp.lock names %s", ref)
		}
		p := &images.Puller{
			Engine:       d,
			BuildToolbox: tb.Ensure,
			Parallel:     1,
			Progress:     images.NewProgress(g.progressOut()),
		}
		r := p.Pull(ctx, []images.Want{w})[0]
		if r.Status == images.StatusFailed {
			return r.Err
		}
		if r.Status == images.StatusPulled && r.Image.ID != "" {
			// pml brought it here: `pml images prune` may remove it once
			// no project it knows uses it.
			recordPulled(g, ws, map[string]string{r.Image.ID: r.Want.String()})
		}
		return nil
	}
}

// wantFor is the wanted image that ref names (same name, and the same tag,
// or the same digest when ref has no tag).
func wantFor(wants []images.Want, ref string) (images.Want, bool) {
	r, err := images.ParseRef(ref)
	if err != nil {
		return images.Want{}, false
	}
	for _, w := range wants {
		if w.Ref.Name != r.Name {
			continue
		}
		if (r.Tag != "" && w.Ref.Tag == r.Tag) || (r.Tag == "" && r.Digest != "" && (w.Ref.Digest == r.Digest || w.Pin == r.Digest)) {
			return w, true
		}
	}
	return images.Want{}, false
}

// currentConfig is the workspace's configuration as pml applies it now
// (trusted grants only: a server added to .pml.json since pml started
// counts once trusted), else the one pml started with.
func currentConfig(ws string, started *config.Config) *config.Config {
	c, err := config.Load(ws, os.Getenv)
	if err != nil {
		return started
	}
	store, err := trust.Open(os.Getenv)
	if err != nil {
		return started
	}
	applied, _, _ := trust.Apply(c, store, permit.DefaultPermissions().Allow)
	if applied == nil {
		return started
	}
	return applied
}

// preinstaller gives `pml images pull` the broker's install path (the
// broker owns it: approval, policy, integrity check), so that approved
// dependencies are installed too. Were it nil, pull would report which
// servers still need their install (see images.DepsInstaller).
var preinstaller = func(ctx context.Context, ws string, cfg *config.Config, rt *docker.Runtime, log zerolog.Logger) (images.DepsInstaller, func(), error) {
	b, err := broker.New(broker.Options{Workspace: ws, Config: cfg, Runtime: rt, Inside: insideSource(rt).Program, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	return b, func() { b.Close(30 * time.Second) }, nil
}

func newImagesPullCmd(g *globals, manifest *string) *cobra.Command {
	var (
		all      bool
		parallel int
		format   string
	)
	cmd := &cobra.Command{
		Use:   "pull",
		Short: "Pull every image the manifest, .pml.json and .pml/mcp.lock name, so later runs need no network",
		Long: "Pull every image the image manifest, .pml.json (mcps, private_mcps, sandbox.shell_image) and .pml/mcp.lock " +
			"(stdio entries) name, each once, a few at a time. A pinned image is pulled by digest; a tag with a pinned " +
			"digest must resolve to it, or the pull fails. Images built on this host (toolbox, shell, node) are built or " +
			"reported missing with how to build them. Progress goes to stderr (bars on a terminal, else a line per step, JSON events unless --log-format text); the " +
			"summary to stdout (--format json: one JSON object). Any image that fails makes the command fail.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := outputFormat(cmd, format, false)
			if err != nil {
				return err
			}
			if parallel < 1 {
				return usageError(cmd, fmt.Errorf("--parallel must be at least 1, not %d", parallel))
			}
			env, err := loadImagesEnv(g, *manifest, all)
			if err != nil {
				return err
			}
			defer env.rt.Close()
			ctx := cmd.Context()
			if _, err := env.rt.Info(ctx); err != nil {
				return engineError(err)
			}
			tb := env.tb
			w, bars, width := g.progressOut()
			p := &images.Puller{
				Engine:       env.rt,
				BuildToolbox: tb.Ensure,
				Parallel:     parallel,
				Progress:     images.NewProgress(w, bars, width),
			}
			results := p.Pull(ctx, env.wants)
			pulled := map[string]string{}
			for _, r := range results {
				if r.Status == images.StatusPulled && r.Image.ID != "" {
					pulled[r.Image.ID] = r.Want.String()
				}
			}
			recordPulled(g, env.ws, pulled)
			deps, depsFailed := pullDeps(ctx, env, g.logger().Level(zerolog.WarnLevel))
			out := cmd.OutOrStdout()
			if f == formatJSON {
				err = writeJSON(out, pullReport(results, deps))
			} else {
				err = writePullTable(out, results, deps)
			}
			if err != nil {
				return err
			}
			var failed []string
			for _, r := range results {
				if r.Status == images.StatusFailed {
					failed = append(failed, fmt.Sprintf("%s: %v", r.Want, r.Err))
				}
			}
			if len(failed) > 0 || depsFailed != nil {
				msg := fmt.Sprintf("%d of %d images failed:\n  %s", len(failed), len(results), strings.Join(failed, "\n  "))
				if len(failed) == 0 {
					msg = depsFailed.Error()
				} else if depsFailed != nil {
					msg += "\n" + depsFailed.Error()
				}
				return &exitError{1, errors.New(msg)}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "also pull the manifest's optional images and the Deno image (needed only when the project runs code)")
	cmd.Flags().IntVar(&parallel, "parallel", 3, "images pulled at the same time")
	addFormatFlag(cmd, &format, nil)
	return cmd
}

// depRow is one server's dependencies after pull.
type depRow struct {
	Server string `json:"server"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// pulledImage is one image in pml images pull --format json.
type pulledImage struct {
	Image    string   `json:"image"`
	Status   string   `json:"status"` // pulled, present, built, local or failed
	UsedBy   []string `json:"used_by"`
	Source   string   `json:"source"`
	Size     int64    `json:"size,omitempty"`
	Digest   string   `json:"digest,omitempty"`
	ID       string   `json:"id,omitempty"`
	Seconds  float64  `json:"seconds,omitempty"`
	Attempts int      `json:"attempts,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// pullJSON is pml images pull --format json: ok is false exactly when the
// command exits 1.
type pullJSON struct {
	OK           bool          `json:"ok"`
	Images       []pulledImage `json:"images"`
	Dependencies []depRow      `json:"dependencies"`
}

func pullReport(results []images.Result, deps []depRow) pullJSON {
	r := pullJSON{OK: true, Images: make([]pulledImage, 0, len(results)), Dependencies: deps}
	if r.Dependencies == nil {
		r.Dependencies = []depRow{}
	}
	for _, res := range results {
		im := pulledImage{Image: res.Want.String(), Status: res.Status, UsedBy: res.Want.UsedBy, Source: res.Want.Source,
			Size: res.Image.Size, Digest: res.Digest, ID: res.Image.ID, Attempts: res.Attempts}
		if res.Status == images.StatusPulled || res.Status == images.StatusBuilt {
			im.Seconds = res.Elapsed.Seconds()
		}
		if res.Err != nil {
			im.Error = res.Err.Error()
		}
		if res.Status == images.StatusFailed {
			r.OK = false
		}
		r.Images = append(r.Images, im)
	}
	for _, d := range deps {
		if d.Error != "" {
			r.OK = false
		}
	}
	return r
}

// writePullTable is the table output: the images' summary, then the
// servers' dependencies when any server has an install step.
func writePullTable(out io.Writer, results []images.Result, deps []depRow) error {
	if err := images.WriteSummary(out, results); err != nil {
		return err
	}
	if len(deps) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(out)
	fmt.Fprintln(tw, "SERVER\tDEPENDENCIES")
	for _, d := range deps {
		s := d.Status
		if d.Error != "" {
			s += ": " + d.Error
		}
		fmt.Fprintf(tw, "%s\t%s\n", d.Server, s)
	}
	return tw.Flush()
}

// pullDeps pre-installs approved dependencies through the broker's hook,
// or, without one, says which servers still need their install. The
// rows come back with the failure, if any, for the output to show.
func pullDeps(ctx context.Context, env *imagesEnv, log zerolog.Logger) ([]depRow, error) {
	var withInstall []config.Server
	for _, s := range env.cfg.Servers {
		if s.Install != nil {
			withInstall = append(withInstall, s)
		}
	}
	if len(withInstall) == 0 {
		return nil, nil
	}
	sort.Slice(withInstall, func(i, j int) bool { return withInstall[i].Name < withInstall[j].Name })
	var rows []depRow
	if preinstaller != nil {
		inst, done, err := preinstaller(ctx, env.ws, env.cfg, env.rt, log)
		if err != nil {
			return nil, fmt.Errorf("dependencies: %w", err)
		}
		defer done()
		res, err := inst.PreinstallApproved(ctx)
		var failed []string
		for _, r := range res {
			row := depRow{Server: r.Server, Status: r.Status}
			if r.Err != nil {
				row.Error = r.Err.Error()
				failed = append(failed, r.Server)
			}
			rows = append(rows, row)
		}
		if err != nil {
			return rows, fmt.Errorf("dependencies: %w", err)
		}
		if len(failed) > 0 {
			return rows, fmt.Errorf("the dependencies of %s failed to install (see above)", strings.Join(failed, ", "))
		}
		return rows, nil
	}
	store := deps.NewStore(env.ws)
	for _, s := range withInstall {
		status := "installed (" + store.Dir(s.Name) + ")"
		if !store.Installed(s) {
			status = "not installed: this pml cannot pre-install yet; call one of " + s.Name + "'s tools once while online and approve its install"
		}
		rows = append(rows, depRow{Server: s.Name, Status: status})
	}
	return rows, nil
}

// recordServed notes in the user's state directory that pml serves the
// project at ws, so that `pml images prune` in any project keeps its
// images. A failure costs only that, so it is a warning.
func recordServed(ws string, log zerolog.Logger) {
	s, err := projects.Open(os.Getenv)
	if err == nil {
		err = s.Served(ws)
	}
	if err != nil {
		log.Warn().Err(err).Msg("this project is not recorded: `pml images prune` in another project may remove its images")
	}
}

// recordPulled notes the images pml pulled or loaded for ws (id to
// reference): they are pml's to prune once no project uses them. ws, a
// project prepared for offline work, is recorded too ("" for none).
func recordPulled(g *globals, ws string, images map[string]string) {
	// Home or / is never recorded as a project (workspace.Refused).
	if ws != "" && workspace.Refused(ws, workspace.Home(os.Getenv)) != "" {
		ws = ""
	}
	if len(images) == 0 && ws == "" {
		return
	}
	s, err := projects.Open(os.Getenv)
	if err == nil {
		err = s.AddPulled(ws, images)
	}
	if err != nil {
		fmt.Fprintf(g.warnings(), "the images pml brought here are not recorded, so `pml images prune` will leave them: %v\n", err)
	}
}
