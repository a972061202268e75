package broker

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	sbx "github.com/pml-dev/pml/broker/sandbox"
	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/egress/inside"
	"github.com/pml-dev/pml/internal/netallow"
	"github.com/pml-dev/pml/internal/shim"
)

// install runs a server's install step (once; concurrent callers wait)
// and then registers its tools.
func (s *serverSet) install(ctx context.Context, srv *server) error {
	srv.installMu.Lock()
	defer srv.installMu.Unlock()
	if s.deps.Installed(srv.cfg) {
		return nil
	}
	pol := serverPolicy(s.sb, srv.cfg)
	network := s.installNetwork(ctx, srv)
	if network == nil {
		// pml's in-container program is missing (a pml built without
		// it) or cannot run there: the install gets the engine's network, as before
		// egress existed.
		s.log.Warn().Str("server", srv.cfg.Name).Msg("the install runs on the engine's bridge network (full egress): pml's egress listener cannot run in its container")
		pol.Network = "bridge"
	}
	if pol.Timeout < policiesDuration(deps.InstallTimeout) {
		pol.Timeout = policiesDuration(deps.InstallTimeout)
	}
	in := &deps.Installer{
		Store:   s.deps,
		Runtime: s.sb.Runtime,
		Spec:    container.Spec{Image: srv.cfg.Image, User: s.sb.User, Policy: pol, Labels: s.sb.Labels("install:" + srv.cfg.Name)},
		Env:     os.Getenv,
		Network: network,
		// An unpinned package (the seeds' npx -y @scope/server) says
		// which version its first install chose.
		Note: func(note string) { s.progress.Info().Str("server", srv.cfg.Name).Msg(note) },
	}
	s.progress.Info().Str("server", srv.cfg.Name).Str("image", srv.cfg.Image).Str("command", srv.cfg.Install.Command+" "+strings.Join(srv.cfg.Install.Args, " ")).Msg("installing (a first install takes a while; a line every few seconds until it ends)")
	began := time.Now()
	stop := s.stillInstalling(srv.cfg.Name, began)
	err := in.Install(ctx, srv.cfg)
	stop()
	if err != nil {
		return err
	}
	s.progress.Info().Str("server", srv.cfg.Name).Str("integrity", srv.cfg.Install.Integrity).Dur("took", time.Since(began).Round(100*time.Millisecond)).Msg("installed and verified")
	return nil
}

// installTick is how often a running install says it still runs.
var installTick = 5 * time.Second

// stillInstalling logs a line every installTick while an install runs, so
// that a 20-second npm install is not 20 seconds of silence; the returned
// function stops it, and returns once no line can follow: the install's
// own last line ("installed and verified") comes after it.
func (s *serverSet) stillInstalling(name string, began time.Time) func() {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(installTick)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s.progress.Info().Str("server", name).Dur("elapsed", time.Since(began).Round(time.Second)).Msg("still installing")
			}
		}
	}()
	return func() { close(done); <-exited }
}

// PreinstallApproved installs the dependencies of every configured server
// whose tools are allowed outright (permissions.allow matches "name:*"),
// for `pml images pull`: later runs then need no network. Servers whose
// install is not approved are reported, not installed.
func (s *serverSet) PreinstallApproved(ctx context.Context) ([]images.DepResult, error) {
	var out []images.DepResult
	for _, srv := range s.serverList() {
		if srv.cfg.Install == nil {
			continue
		}
		r := images.DepResult{Server: srv.cfg.Name}
		switch d, _ := s.decide(srv.cfg.Name + ":*"); {
		case s.deps.Installed(srv.cfg):
			r.Status = "present"
		case d != Allow:
			r.Status = "needs approval (allow \"" + srv.cfg.Name + ":*\" in .pml.json, or call one of its tools once and approve the install)"
		default:
			if err := s.install(ctx, srv); err != nil {
				r.Status, r.Err = "failed", err
			} else {
				r.Status = "installed"
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// installNetwork gives an install its network through pml's egress
// proxy: the registry's host (deps.RegistryHosts) and the server's own
// network.allow, nothing else; the container keeps network none. nil
// when pml's program cannot run in the container.
func (s *serverSet) installNetwork(ctx context.Context, srv *server) func(*container.Spec) error {
	exe := s.sb.Supervisor(ctx)
	if exe == "" {
		return nil
	}
	return func(spec *container.Spec) error {
		rules := srv.cfg.Network.Rules
		hosts := deps.RegistryHosts(srv.cfg.Install, s.deps.Workspace(), os.Getenv)
		extra, err := netallow.ParseList(hosts)
		if err != nil {
			return err
		}
		rules = rules.With(extra...)
		rules = withLoopbackForwards(rules, extra)
		if rules.Empty() {
			return nil
		}
		id := "install:" + srv.cfg.Name
		if err := s.sb.Egress.Give(spec, id, "the install of "+srv.cfg.Name, "its package registry ("+strings.Join(hosts, ", ")+") or "+sbx.NetworkKey(srv.cfg.Private, srv.cfg.Name), rules); err != nil {
			return err
		}
		spec.Mounts = append(spec.Mounts, container.Mount{Source: exe, Target: shim.Binary, ReadOnly: true})
		spec.Entrypoint = append([]string{shim.Binary, inside.RunSubcommand, spec.Egress, "--"}, spec.Entrypoint...)
		spec.Egress = "" // run by the wrapper above, not the runtime
		return nil
	}
}

// withLoopbackForwards adds, for a registry on this machine's loopback
// (a Verdaccio on 127.0.0.1:4873, the person's npm configuration naming
// it), a forward of the same port: inside the container 127.0.0.1 is the
// container's own and bypasses the proxy (NO_PROXY), so npm connects
// there and the forward carries it to the host's port, the one the
// registry entry allows. A port the server already forwards is left as
// it is.
func withLoopbackForwards(rules netallow.Rules, hosts []netallow.Entry) netallow.Rules {
	forwards := append([]netallow.Forward(nil), rules.Forward...)
	taken := map[int]bool{}
	for _, f := range forwards {
		taken[f.ListenPort] = true
	}
	for _, e := range hosts {
		if (e.Host != "127.0.0.1" && e.Host != "localhost") || e.Port == 0 || taken[e.Port] {
			continue
		}
		f, err := netallow.ParseForward("127.0.0.1:"+strconv.Itoa(e.Port), e.String())
		if err != nil {
			continue
		}
		forwards = append(forwards, f)
		taken[e.Port] = true
	}
	rules.Forward = forwards
	return rules
}
