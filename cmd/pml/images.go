package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/credentials"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/docker"
	"github.com/pml-dev/pml/internal/projects"
	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/workspace"
)

func newImagesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Manage the images pml runs tools in",
		Long: "pml runs every tool in a container. These commands prepare a host for offline work: pull every image the " +
			"image manifest, .pml.json and .pml/mcp.lock name (by digest when pinned), list them, carry them to an " +
			"air-gapped host in a verified bundle, and prune the ones nothing uses any more.",
	}
	var manifest string
	cmd.PersistentFlags().StringVar(&manifest, "manifest", "", "image manifest to use instead of the embedded images/manifest.yaml (env "+images.ManifestEnv+")")
	cmd.AddCommand(newImagesBuildCmd(), newImagesPullCmd(g, &manifest), newImagesListCmd(g, &manifest),
		newImagesSaveCmd(g, &manifest), newImagesLoadCmd(g), newImagesPruneCmd(g, &manifest))
	return cmd
}

func newImagesBuildCmd() *cobra.Command {
	var (
		busybox string
		force   bool
	)
	build := &cobra.Command{
		Use:   "build",
		Short: "Build pml's own images locally, without a registry",
		Long:  "Build the toolbox image from pml's in-container program for the daemon's architecture (embedded in this pml when it was built) and the shell image from a static busybox (Debian's busybox-static). Prints the images' names on stdout (toolbox image: REF, shell image: REF).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rt, err := openRuntime(hostOf(cmd), nil)
			if err != nil {
				return err
			}
			defer rt.Close()
			tb := &images.Toolbox{Runtime: rt, Program: insideSource(rt).Program}
			ref, err := tb.Ensure(cmd.Context())
			if err != nil {
				return &exitError{5, err}
			}
			fmt.Fprintln(cmd.OutOrStdout(), "toolbox image:", ref)
			if busybox != "" {
				// Rebuilding an image that is there only leaves the old one
				// dangling; --force replaces it on purpose.
				exists, err := rt.ImageExists(cmd.Context(), images.ShellRef)
				if err != nil {
					return &exitError{5, err}
				}
				if !exists || force {
					if err := images.BuildShell(cmd.Context(), rt, busybox, images.ShellRef); err != nil {
						return &exitError{5, err}
					}
				}
				fmt.Fprintln(cmd.OutOrStdout(), "shell image:", images.ShellRef)
			}
			return nil
		},
	}
	build.Flags().BoolVar(&force, "force", false, "rebuild the shell image even when it exists")
	build.Flags().StringVar(&busybox, "busybox", "", "static busybox to build the shell image from (e.g. /bin/busybox from busybox-static)")
	return build
}

// imagesEnv is what every images subcommand starts from: the workspace,
// its config, the manifest, the wanted images and the daemon.
type imagesEnv struct {
	ws    string
	cfg   *config.Config
	man   *images.Manifest
	tb    *images.Toolbox
	wants []images.Want
	rt    *docker.Runtime
}

// loadImagesEnv reads everything and connects to nothing yet: a bad
// config or manifest is reported (exit 2) before Docker is touched.
func loadImagesEnv(g *globals, manifestFlag string, all bool) (*imagesEnv, error) {
	log, ws, cfg, err := g.project()
	if err != nil {
		return nil, err
	}
	man, err := images.LoadManifest(images.ManifestPath(manifestFlag, os.Getenv))
	if err != nil {
		return nil, &exitError{2, err}
	}
	locked, warnings, err := images.LockfileImages(ws.Dir)
	if err != nil {
		return nil, &exitError{2, err}
	}
	for _, w := range warnings {
		log.Warn().Msg(w)
	}
	rt, err := openRuntime(g.host, cfg)
	if err != nil {
		return nil, err
	}
	tb := &images.Toolbox{Runtime: rt, Program: insideSource(rt).Program}
	// The toolbox tag is the digest of the in-container program for the
	// daemon's architecture: asking it is the first contact with Docker.
	var tagErr error
	wants, err := images.Collect(images.Sources{
		Manifest: man,
		ExeTag: func() (string, error) {
			ref, err := tb.Ref(context.Background())
			if err != nil {
				tagErr = err
				return "", err
			}
			// The tag follows the last colon (a registry host may have a port).
			return ref[strings.LastIndex(ref, ":")+1:], nil
		},
		Servers:    cfg.Servers,
		ShellImage: cfg.Sandbox.ShellImage,
		Lockfile:   locked,
		All:        all,
		RunsCode:   runsCode(ws.Dir, &log),
	})
	if tagErr != nil {
		rt.Close()
		return nil, engineError(tagErr)
	}
	if err != nil {
		rt.Close()
		return nil, &exitError{2, err}
	}
	return &imagesEnv{ws: ws.Dir, cfg: cfg, man: man, tb: tb, wants: wants, rt: rt}, nil
}

// engineError gives an Engine failure its exit code: 5 for a daemon that
// does not answer, else 1 (see exitCodeFor).
func engineError(err error) error {
	return &exitError{exitCodeFor(err), err}
}

func newImagesListCmd(g *globals, manifest *string) *cobra.Command {
	var (
		asJSON, all bool
		format      string
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the images pml uses here: what uses each, present or missing, size, digest",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := outputFormat(cmd, format, asJSON)
			if err != nil {
				return err
			}
			env, err := loadImagesEnv(g, *manifest, all)
			if err != nil {
				return err
			}
			defer env.rt.Close()
			rows, err := images.List(cmd.Context(), env.rt, env.wants)
			if err != nil {
				return engineError(err)
			}
			if f == formatJSON {
				if rows == nil {
					rows = []images.Row{}
				}
				return writeJSON(cmd.OutOrStdout(), rows)
			}
			return images.WriteTable(cmd.OutOrStdout(), rows)
		},
	}
	addFormatFlag(cmd, &format, &asJSON)
	cmd.Flags().BoolVar(&all, "all", false, "include the manifest's optional images and the Deno image")
	return cmd
}

func newImagesSaveCmd(g *globals, manifest *string) *cobra.Command {
	var (
		out        string
		all        bool
		imagesOnly bool
		format     string
	)
	cmd := &cobra.Command{
		Use:   "save -o FILE.tar.zst [IMAGE...]",
		Short: "Write one bundle for an offline host: the images, the installed dependencies, the lockfile and the tools cache",
		Long: "Write one zstd-compressed bundle holding what the project needs on a host with no network: the images " +
			"`pml images pull` would get (or the IMAGEs named; the Deno image only when the project runs code or has an " +
			"API key, or with --all), the installed dependencies of its servers (.pml/deps) with their integrity records " +
			"(.pml/deps.json), .pml/mcp.lock, and the caches pml lists tools and routes from (.pml/tools-cache.json, " +
			".pml/routing-cache.json, .pml/registry-cache). " + images.BundleManifestName + " comes first with the size " +
			"and sha256 of every other part. Carry the file and the pml binary to the offline host and run `pml images " +
			"load -i FILE` in the project there. Progress goes to stderr; the file is written atomically. --format json prints " +
			`one JSON object: {"file", "size", "raw_size", "images": [{"ref", "id"}], "project_files": [".pml/…"]}.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := outputFormat(cmd, format, false)
			if err != nil {
				return err
			}
			if out == "" {
				return &exitError{2, errors.New("say where to write the bundle: pml images save -o FILE.tar.zst")}
			}
			if st, err := os.Stat(out); err == nil && st.IsDir() {
				return &exitError{2, fmt.Errorf("%s is a directory; give a file name (e.g. %s)", out, filepath.Join(out, "pml-bundle.tar.zst"))}
			}
			env, err := loadImagesEnv(g, *manifest, all)
			if err != nil {
				return err
			}
			defer env.rt.Close()
			wants := env.wants
			if len(args) > 0 {
				wants, err = selectWants(env.wants, args)
				if err != nil {
					return &exitError{2, err}
				}
			}
			opt := images.SaveOptions{Out: out, PMLVersion: version,
				Progress: images.NewBundleProgress(g.progressOut())}
			if !imagesOnly {
				var missing []string
				opt.Servers, missing = installedServers(env)
				if len(missing) > 0 {
					return &exitError{1, fmt.Errorf("cannot save: the dependencies of %s are not installed here, so the offline host would have to install them from the network; run `pml images pull` (it installs them), or pass --images-only (nothing was written)", strings.Join(missing, ", "))}
				}
				opt.Workspace = env.ws
				if opt.Parts, err = images.WorkspaceParts(env.ws, opt.Servers); err != nil {
					return &exitError{1, err}
				}
			}
			man, err := images.Save(cmd.Context(), env.rt, wants, opt)
			if err != nil {
				return engineError(err)
			}
			st, err := os.Stat(out)
			if err != nil {
				return err
			}
			var raw int64
			for _, f := range man.Files {
				raw += f.Size
			}
			if f == formatJSON {
				return writeJSON(cmd.OutOrStdout(), saveReport(out, st.Size(), raw, man))
			}
			w := cmd.OutOrStdout()
			for _, im := range man.Images {
				fmt.Fprintf(w, "saved %s (%s)\n", im.Ref, shortID(im.ID))
			}
			if man.Workspace != nil {
				fmt.Fprintf(w, "saved .pml/%s\n", strings.Join(man.Workspace.Parts, ", .pml/"))
			}
			fmt.Fprintf(w, "wrote %s: %d images, %s (%s before compression)\n", out, len(man.Images), sizeOf(st.Size()), sizeOf(raw))
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "bundle file to write")
	cmd.Flags().BoolVar(&all, "all", false, "include the manifest's optional images and the Deno image")
	cmd.Flags().BoolVar(&imagesOnly, "images-only", false, "carry the images only, no project files")
	addFormatFlag(cmd, &format, nil)
	return cmd
}

// checkCarriedDeps checks the dependencies a bundle carries, staged in
// dir (standing for .pml), against the integrity .pml.json pins for each
// server, as an install does: a bundle made for another version of the
// project is refused before anything changes.
func checkCarriedDeps(ctx context.Context, dir string, servers []string, cfg *config.Config) error {
	for _, name := range servers {
		s, ok := cfg.Servers[name]
		if !ok || s.Install == nil || s.Install.Integrity == "" {
			continue
		}
		got, err := deps.Integrity(ctx, dir, filepath.Join(dir, "deps", name), s.Install)
		if err != nil {
			return fmt.Errorf("the dependencies of %s it carries cannot be checked: %w", name, err)
		}
		if got != s.Install.Integrity {
			return fmt.Errorf("the dependencies of %s it carries have integrity %s, .pml.json pins %s: make the bundle again from this version of the project", name, got, s.Install.Integrity)
		}
	}
	return nil
}

// installedServers splits the servers with an install step into those
// whose dependencies are installed here and those still missing them.
func installedServers(env *imagesEnv) (installed, missing []string) {
	store := deps.NewStore(env.ws)
	for _, s := range env.cfg.Servers {
		if s.Install == nil {
			continue
		}
		if store.Installed(s) {
			installed = append(installed, s.Name)
		} else {
			missing = append(missing, s.Name)
		}
	}
	sort.Strings(installed)
	sort.Strings(missing)
	return installed, missing
}

// runsCode reports whether the project needs the Deno image: it has an
// API key (the cloud may answer execute_locally), a deno capability or a
// deno entry in its lockfile. An unreadable file counts as code, so the
// image is not left out on a guess.
func runsCode(ws string, log *zerolog.Logger) bool {
	if key, _, _ := credentials.APIKey(os.Getenv); key != "" {
		return true
	}
	caps, err := tl.LoadCapabilities(ws)
	if err != nil {
		log.Warn().Err(err).Msg("the Deno image counts as needed")
		return true
	}
	for _, c := range caps {
		if c.Type == "deno" {
			return true
		}
	}
	code, err := images.LockfileHasCode(ws)
	if err != nil {
		log.Warn().Err(err).Msg("the Deno image counts as needed")
		return true
	}
	return code
}

// selectWants picks the wants the user named; a name pml does not use is
// still saved (as an unpinned reference) so any image can be carried.
func selectWants(wants []images.Want, names []string) ([]images.Want, error) {
	var out []images.Want
	for _, n := range names {
		r, err := images.ParseRef(n)
		if err != nil {
			return nil, err
		}
		found := false
		for _, w := range wants {
			if w.Ref.Name == r.Name && ((r.Tag != "" && w.Ref.Tag == r.Tag) || (r.Digest != "" && (w.Pin == r.Digest))) {
				out = append(out, w)
				found = true
				break
			}
		}
		if !found {
			w := images.Want{Ref: r, Pin: r.Digest, Source: images.SourceRegistry, UsedBy: []string{"named on the command line"}}
			if r.Tag != "" {
				w.Ref.Digest = ""
			}
			out = append(out, w)
		}
	}
	return out, nil
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func newImagesLoadCmd(g *globals) *cobra.Command {
	var (
		in         string
		imagesOnly bool
		format     string
	)
	cmd := &cobra.Command{
		Use:   "load -i FILE.tar.zst",
		Short: "Load a bundle written by `pml images save`, after verifying every checksum",
		Long: "Verify every part of the bundle against its " + images.BundleManifestName + " (a corrupted or altered " +
			"bundle is refused, naming the part, and nothing is loaded or changed), then load the images, check that each " +
			"has the recorded image ID and restore their names, and only then put the project files it carries " +
			"(installed dependencies, deps.json, mcp.lock, the tools cache) into the workspace's .pml, each replacing " +
			"what was there. Needs no network. Bundles of the first format (images only, uncompressed) load too. " +
			`--format json prints one JSON object: {"ok", "images": [{"ref", "id", "names", "new"}], "restored": [paths], ` +
			`"left_out": [".pml/…"], "error"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := outputFormat(cmd, format, false)
			if err != nil {
				return err
			}
			if in == "" {
				return &exitError{2, errors.New("say which bundle to load: pml images load -i FILE.tar.zst")}
			}
			if _, err := os.Stat(in); err != nil {
				return &exitError{2, fmt.Errorf("cannot read the bundle: %w", err)}
			}
			opt := images.LoadOptions{Progress: images.NewBundleProgress(g.progressOut())}
			if !imagesOnly {
				head, err := images.PeekBundle(in)
				if err != nil {
					return &exitError{1, err}
				}
				if head.Workspace != nil {
					// The project files go to the workspace pml would serve
					// from here (PML_WORKSPACE, else the nearest project
					// root), and only to a project.
					_, ws, cfg, err := g.project()
					if err != nil {
						return err
					}
					if !cfg.Exists {
						return &exitError{2, fmt.Errorf("the bundle carries project files (.pml/%s) but %s has no .pml.json: run the load in the project (or set PML_WORKSPACE to it), or pass --images-only; nothing was loaded",
							strings.Join(head.Workspace.Parts, ", .pml/"), ws.Dir)}
					}
					opt.Workspace = ws.Dir
					opt.CheckStaged = func(dir string) error { return checkCarriedDeps(cmd.Context(), dir, head.Workspace.Servers, cfg) }
				}
			}
			rt, err := openRuntime(hostOf(cmd), nil)
			if err != nil {
				return err
			}
			defer rt.Close()
			if _, err := rt.Info(cmd.Context()); err != nil {
				return engineError(err)
			}
			tb := &images.Toolbox{Runtime: rt, Program: insideSource(rt).Program}
			if opt.Toolbox, err = tb.Ref(cmd.Context()); err != nil {
				return err
			}
			if prog, err := tb.Program(cmd.Context()); err != nil {
				return err
			} else if opt.ToolboxLayer, err = images.ToolboxLayer(prog); err != nil {
				return err
			}
			res, err := images.Load(cmd.Context(), rt, in, opt)
			if err == nil && res != nil && len(res.Parts) > 0 {
				err = revouchRestored(cmd.Context(), opt.Workspace, res.Parts)
			}
			w := cmd.OutOrStdout()
			if f == formatJSON {
				r := loadReport(res, opt.Workspace, err)
				w = io.Discard
				defer func() { _ = writeJSON(cmd.OutOrStdout(), r) }()
			}
			if res != nil {
				for _, l := range res.Images {
					fmt.Fprintf(w, "loaded %s (%s) as %s\n", l.Image.Ref, shortID(l.Image.ID), strings.Join(l.Names, ", "))
				}
				loaded := map[string]string{}
				for _, l := range res.Images {
					if l.New {
						loaded[l.Image.ID] = l.Image.Ref
					}
				}
				recordPulled(g, opt.Workspace, loaded)
				for _, p := range res.Parts {
					fmt.Fprintf(w, "restored %s\n", filepath.Join(opt.Workspace, ".pml", filepath.FromSlash(p)))
				}
				if res.Manifest.Workspace != nil && opt.Workspace == "" && err == nil {
					fmt.Fprintf(w, "left out the project files (--images-only): .pml/%s\n", strings.Join(res.Manifest.Workspace.Parts, ", .pml/"))
				}
			}
			if err != nil {
				var be *images.BundleError
				if errors.As(err, &be) {
					return &exitError{1, err}
				}
				return engineError(err)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&in, "input", "i", "", "bundle file to load")
	cmd.Flags().BoolVar(&imagesOnly, "images-only", false, "load the images only and leave the workspace as it is")
	addFormatFlag(cmd, &format, nil)
	return cmd
}

func newImagesPruneCmd(g *globals, manifest *string) *cobra.Command {
	var (
		dryRun, includeBase bool
		repo, format        string
	)
	cmd := &cobra.Command{
		Use:   "prune [--dry-run]",
		Short: "Remove the images pml built or pulled that no project on this host uses any more",
		Long: "Images are shared by the whole host, so prune looks at every project pml has served here (recorded in " +
			"pml's state directory, $XDG_STATE_HOME/pml/" + projects.FileName + "), not only this one: it removes an " +
			"image only when pml built it (label pml.image naming one of the manifest's images) or pulled or loaded it " +
			"(as recorded), and neither the manifest, nor the .pml.json or .pml/mcp.lock of any known project references " +
			"it. Every other image is left alone. The engine may be shared by other users, whose projects pml cannot see: " +
			"an image any container on the engine was created from (running or stopped, whoever's) is kept, and so are " +
			"pml's base images (pml/toolbox of any version, pml/shell, pml/node, pml/python, pml/deno) unless --include-base; prune " +
			"says what it keeps and why. Run outside a project (in your home directory, say), it considers only the " +
			"projects pml knows and records nothing. --dry-run prints what would go and why, and removes nothing. " +
			`--format json prints one JSON object: {"ok", "dry_run", "removed", "would_remove", "kept": [{"names", "id", ` +
			`"size", "reason"}], "failed": [errors]}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := outputFormat(cmd, format, false)
			if err != nil {
				return err
			}
			// --all: the optional images count as referenced, so prune
			// never removes what `pull --all` fetched.
			env, err := loadImagesEnv(g, *manifest, true)
			if err != nil {
				return err
			}
			defer env.rt.Close()
			ctx := cmd.Context()
			store, err := projects.Open(os.Getenv)
			if err != nil {
				return &exitError{1, err}
			}
			rec, err := store.Read()
			if err != nil {
				return &exitError{1, err}
			}
			errOut := g.narration()
			// Home or / is never a project: its config is not one, and
			// nothing is recorded for it.
			here := env.ws
			if why := workspace.Refused(env.ws, workspace.Home(os.Getenv)); why != "" {
				fmt.Fprintf(errOut, "%s is not a project (%s): only the projects pml knows count\n", termsafe.Quote(env.ws, 1024), why)
				here = ""
			}
			wants, known, gone, err := knownProjectWants(ctx, env, here, rec)
			if err != nil {
				return &exitError{1, fmt.Errorf("%w; nothing was removed", err)}
			}
			if len(known) == 0 {
				fmt.Fprintln(errOut, "pml knows no project of yours on this host")
			} else {
				fmt.Fprintf(errOut, "images in use by %d projects pml knows on this host: %s\n", len(known), strings.Join(known, ", "))
			}
			if len(gone) > 0 {
				fmt.Fprintf(errOut, "projects whose directory is gone no longer keep images: %s\n", strings.Join(gone, ", "))
			}
			keep, err := images.KeepIDs(ctx, env.rt, wants)
			if err != nil {
				return engineError(err)
			}
			built := map[string]bool{}
			for _, p := range env.man.Images {
				built[p.Name] = true
			}
			pulled := map[string]string{}
			for id, p := range rec.Pulled {
				why := "pulled or loaded by pml"
				if len(p.Projects) > 0 {
					why += " for " + strings.Join(p.Projects, ", ")
				}
				pulled[id] = why
			}
			all, err := env.rt.ListImages(ctx)
			if err != nil {
				return engineError(err)
			}
			inUse, err := containerUsers(ctx, env.rt)
			if err != nil {
				return engineError(err)
			}
			cands, kept := images.SelectPrune(all, images.PruneScope{Keep: keep, Built: built, Pulled: pulled, RepoPrefix: repo,
				Known: fmt.Sprintf("the %d projects pml knows for you on this host, nor by any container on this engine", len(known)),
				InUse: inUse, Base: baseRepos(env.man), IncludeBase: includeBase})
			out := cmd.OutOrStdout()
			rep := pruneJSON{DryRun: dryRun, Removed: []prunedImage{}, WouldRemove: []prunedImage{}, Kept: []prunedImage{}, Failed: []string{}}
			if f == formatJSON {
				out = io.Discard
				defer func() {
					rep.OK = len(rep.Failed) == 0
					_ = writeJSON(cmd.OutOrStdout(), rep)
				}()
			}
			for _, k := range kept {
				rep.Kept = append(rep.Kept, prunedOf(images.PruneCandidate{Image: k.Image}.Names(), k.Image, k.Reason))
				fmt.Fprintf(out, "kept %s (%s, %s): %s\n", strings.Join(images.PruneCandidate{Image: k.Image}.Names(), ", "), shortID(k.Image.ID), sizeOf(k.Image.Size), k.Reason)
			}
			if len(cands) == 0 {
				fmt.Fprintln(out, "nothing to prune")
				return nil
			}
			if dryRun {
				for _, c := range cands {
					rep.WouldRemove = append(rep.WouldRemove, prunedOf(c.Names(), c.Image, c.Reason))
					fmt.Fprintf(out, "would remove %s (%s, %s): %s\n", strings.Join(c.Names(), ", "), shortID(c.Image.ID), sizeOf(c.Image.Size), c.Reason)
				}
				return nil
			}
			var failed, removed []string
			for _, r := range images.Prune(ctx, env.rt, cands) {
				c := r.Candidate
				switch {
				case r.Removed:
					removed = append(removed, c.Image.ID)
					rep.Removed = append(rep.Removed, prunedOf(c.Names(), c.Image, c.Reason))
					fmt.Fprintf(out, "removed %s (%s, %s): %s\n", strings.Join(c.Names(), ", "), shortID(c.Image.ID), sizeOf(c.Image.Size), c.Reason)
				case r.InUse:
					rep.Kept = append(rep.Kept, prunedOf(c.Names(), c.Image, "a container uses it"))
					fmt.Fprintf(out, "kept %s: a container uses it\n", strings.Join(c.Names(), ", "))
				default:
					failed = append(failed, r.Err.Error())
				}
			}
			if err := store.Forget(removed); err != nil {
				failed = append(failed, err.Error())
			}
			if len(failed) > 0 {
				rep.Failed = failed
				return &exitError{1, fmt.Errorf("prune failed for: %s", strings.Join(failed, "; "))}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be removed and why, remove nothing")
	cmd.Flags().StringVar(&repo, "repo", "", "only consider images whose name starts with this prefix (e.g. pml/toolbox)")
	addFormatFlag(cmd, &format, nil)
	cmd.Flags().BoolVar(&includeBase, "include-base", false, "also remove pml's base images (pml/toolbox of other versions, pml/shell, pml/node, pml/python, pml/deno) that no project pml knows uses; other users' projects on a shared engine may need them")
	return cmd
}

// knownProjectWants returns the images of every project known on this
// host (this one included), read afresh from each project's .pml.json and
// .pml/mcp.lock with this pml's manifest. A project whose directory is gone is
// returned in gone and keeps nothing; one that cannot be read is an
// error, since its images cannot be told.
func knownProjectWants(ctx context.Context, env *imagesEnv, here string, rec *projects.Record) (wants []images.Want, known, gone []string, err error) {
	ref, err := env.tb.Ref(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	_, exeTag, _ := strings.Cut(ref, ":")
	// This pml's own images count even outside a project: the manifest's
	// always-needed ones, with no project's servers.
	if here == "" {
		w, err := images.Collect(images.Sources{Manifest: env.man, ExeTag: func() (string, error) { return exeTag, nil }, All: true})
		if err != nil {
			return nil, nil, nil, err
		}
		wants = append(wants, w...)
	}
	var dirs []string
	for d := range rec.Projects {
		if d != here && workspace.Refused(d, workspace.Home(os.Getenv)) == "" {
			dirs = append(dirs, d)
		}
	}
	sort.Strings(dirs)
	if here != "" {
		dirs = append([]string{here}, dirs...)
	}
	for _, d := range dirs {
		if d != here {
			if st, err := os.Stat(d); err != nil || !st.IsDir() {
				gone = append(gone, d)
				continue
			}
		}
		w, err := projectWants(d, env, exeTag)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("cannot tell which images the project %s uses: %w; fix it, or remove the directory if the project is gone", d, err)
		}
		wants = append(wants, w...)
		known = append(known, d)
	}
	return wants, known, gone, nil
}

// containerUsers maps the image ID of every container on the engine to
// who uses it: the container, and the project a pml container names in
// its labels. Another user's project is known to this pml only this way.
func containerUsers(ctx context.Context, rt *docker.Runtime) (map[string]string, error) {
	var lister container.ImageUsers = rt
	list, err := lister.ListImageUsers(ctx)
	if err != nil {
		return nil, err
	}
	users := map[string][]string{}
	for _, c := range list {
		who := "container " + termsafe.Quote(c.Name, 128)
		if ws := c.Labels[container.LabelWorkspace]; ws != "" {
			who += " of project " + termsafe.Quote(ws, 1024)
		}
		users[c.ImageID] = append(users[c.ImageID], who)
	}
	out := map[string]string{}
	for id, who := range users {
		sort.Strings(who)
		if len(who) > 3 {
			who = append(who[:3], fmt.Sprintf("%d more", len(who)-3))
		}
		out[id] = strings.Join(who, ", ") + " on this engine"
	}
	return out, nil
}

// baseRepos are the repositories of the manifest's local images (pml's
// own: toolbox, shell, node, deno) and what runs in each.
func baseRepos(man *images.Manifest) map[string]string {
	out := map[string]string{}
	for _, p := range man.Images {
		if p.Source != images.SourceLocal {
			continue
		}
		repo := p.Ref
		if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
			repo = repo[:i]
		}
		out[repo] = repo + ", for " + p.UsedBy
	}
	return out
}

// projectWants collects the images of the project at dir.
func projectWants(dir string, env *imagesEnv, exeTag string) ([]images.Want, error) {
	cfg := env.cfg
	if dir != env.ws {
		var err error
		if cfg, err = config.Load(dir, func(string) string { return "" }); err != nil {
			return nil, err
		}
	}
	locked, _, err := images.LockfileImages(dir)
	if err != nil {
		return nil, err
	}
	return images.Collect(images.Sources{
		Manifest:   env.man,
		ExeTag:     func() (string, error) { return exeTag, nil },
		Servers:    cfg.Servers,
		ShellImage: cfg.Sandbox.ShellImage,
		Lockfile:   locked,
		All:        true,
	})
}

func sizeOf(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// The --format json documents of pml images save, load and prune. Every
// list is present (empty, not null) so a script can read it directly.

// savedImage is one image of a bundle.
type savedImage struct {
	Ref string `json:"ref"`
	ID  string `json:"id"`
}

// saveJSON is pml images save --format json.
type saveJSON struct {
	File         string       `json:"file"`
	Size         int64        `json:"size"`     // bytes of the bundle
	RawSize      int64        `json:"raw_size"` // bytes before compression
	Images       []savedImage `json:"images"`
	ProjectFiles []string     `json:"project_files"` // ".pml/…" the bundle carries
}

func saveReport(file string, size, raw int64, man *images.BundleManifest) saveJSON {
	r := saveJSON{File: file, Size: size, RawSize: raw, Images: []savedImage{}, ProjectFiles: []string{}}
	for _, im := range man.Images {
		r.Images = append(r.Images, savedImage{Ref: im.Ref, ID: im.ID})
	}
	if man.Workspace != nil {
		for _, p := range man.Workspace.Parts {
			r.ProjectFiles = append(r.ProjectFiles, ".pml/"+p)
		}
	}
	return r
}

// loadedImage is one image a load put on the engine.
type loadedImage struct {
	Ref   string   `json:"ref"`
	ID    string   `json:"id"`
	Names []string `json:"names"`
	New   bool     `json:"new"` // not on the engine before the load
}

// loadJSON is pml images load --format json: ok is false exactly when the
// load failed (error says why; what was done before is listed).
type loadJSON struct {
	OK       bool          `json:"ok"`
	Images   []loadedImage `json:"images"`
	Restored []string      `json:"restored"` // project files put in place
	LeftOut  []string      `json:"left_out"` // project files --images-only left out
	Error    string        `json:"error"`
}

func loadReport(res *images.LoadResult, ws string, err error) loadJSON {
	r := loadJSON{OK: err == nil, Images: []loadedImage{}, Restored: []string{}, LeftOut: []string{}}
	if err != nil {
		r.Error = err.Error()
	}
	if res == nil {
		return r
	}
	for _, l := range res.Images {
		names := l.Names
		if names == nil {
			names = []string{}
		}
		r.Images = append(r.Images, loadedImage{Ref: l.Image.Ref, ID: l.Image.ID, Names: names, New: l.New})
	}
	for _, p := range res.Parts {
		r.Restored = append(r.Restored, filepath.Join(ws, ".pml", filepath.FromSlash(p)))
	}
	if res.Manifest != nil && res.Manifest.Workspace != nil && ws == "" && err == nil {
		for _, p := range res.Manifest.Workspace.Parts {
			r.LeftOut = append(r.LeftOut, ".pml/"+p)
		}
	}
	return r
}

// prunedImage is one image prune removed, would remove or kept.
type prunedImage struct {
	Names  []string `json:"names"`
	ID     string   `json:"id"`
	Size   int64    `json:"size"`
	Reason string   `json:"reason"`
}

// pruneJSON is pml images prune --format json: ok is false exactly when
// an image could not be removed (failed says why).
type pruneJSON struct {
	OK          bool          `json:"ok"`
	DryRun      bool          `json:"dry_run"`
	Removed     []prunedImage `json:"removed"`
	WouldRemove []prunedImage `json:"would_remove"`
	Kept        []prunedImage `json:"kept"`
	Failed      []string      `json:"failed"`
}

func prunedOf(names []string, im images.Image, reason string) prunedImage {
	if names == nil {
		names = []string{}
	}
	return prunedImage{Names: names, ID: im.ID, Size: im.Size, Reason: reason}
}
