package broker

import (
	"context"
	"os"
	"strings"

	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/deps"
)

// install runs a server's install step (once; concurrent callers wait)
// and then registers its tools.
func (b *Broker) install(ctx context.Context, srv *server) error {
	srv.installMu.Lock()
	defer srv.installMu.Unlock()
	if b.deps.Installed(srv.cfg) {
		return nil
	}
	pol := b.sb.policy()
	pol.Network = "bridge"
	if pol.Timeout < policiesDuration(deps.InstallTimeout) {
		pol.Timeout = policiesDuration(deps.InstallTimeout)
	}
	in := &deps.Installer{
		Store:   b.deps,
		Runtime: b.sb.rt,
		Spec:    container.Spec{Image: srv.cfg.Image, User: b.sb.user, Policy: pol, Labels: b.sb.labels("install:" + srv.cfg.Name)},
		Env:     os.Getenv,
	}
	b.log.Info().Str("server", srv.cfg.Name).Str("command", srv.cfg.Install.Command+" "+strings.Join(srv.cfg.Install.Args, " ")).Msg("installing")
	if err := in.Install(ctx, srv.cfg); err != nil {
		return err
	}
	b.log.Info().Str("server", srv.cfg.Name).Str("integrity", srv.cfg.Install.Integrity).Msg("installed and verified")
	return nil
}

// PreinstallApproved installs the dependencies of every configured server
// whose tools are allowed outright (permissions.allow matches "name:*"),
// for `pml images pull`: later runs then need no network. Servers whose
// install is not approved are reported, not installed.
func (b *Broker) PreinstallApproved(ctx context.Context) ([]images.DepResult, error) {
	var out []images.DepResult
	for _, srv := range b.serverList() {
		if srv.cfg.Install == nil {
			continue
		}
		r := images.DepResult{Server: srv.cfg.Name}
		switch d, _ := b.decide(srv.cfg.Name + ":*"); {
		case b.deps.Installed(srv.cfg):
			r.Status = "present"
		case d != Allow:
			r.Status = "needs approval (allow \"" + srv.cfg.Name + ":*\" in .pml.json, or call one of its tools once and approve the install)"
		default:
			if err := b.install(ctx, srv); err != nil {
				r.Status, r.Err = "failed", err
			} else {
				r.Status = "installed"
			}
		}
		out = append(out, r)
	}
	return out, nil
}
