package approve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/config"
)

// ApprovalNetwork: a server or shell:exec tried to reach a host:port its
// network.allow does not name; pml's egress proxy refused it.
const ApprovalNetwork ApprovalType = "network"

// networkGrant is what a network approval carries out: the host:ports to
// allow through proxy id, and the list "always" adds them to.
type networkGrant struct {
	id    string
	who   string
	key   string // "mcps.NAME.network.allow", "sandbox.network.allow"
	hosts []string
}

// egressOf names the proxy a tool's containers use (id "" when the tool
// has none).
func (ap *Approver) egressOf(tool string) egress {
	if tool == ap.ShellTool {
		return egress{id: shellEgressID, shell: true}
	}
	if srv, ok := ap.Servers.ServerOf(tool); ok {
		return egress{id: serverEgressID(srv.Name), srv: srv}
	}
	return egress{}
}

// egress is a tool's proxy: its id, and whose it is (shell:exec's, or
// srv's).
type egress struct {
	id    string
	shell bool
	srv   config.Server
}

// names says whose the proxy is and which list allows its hosts: worded
// only when there is an approval to word, not on every call.
func (e egress) names() (who, key string) {
	if e.shell {
		return "shell:exec", "sandbox.network.allow"
	}
	return "server " + e.srv.Name, networkKey(e.srv.Private, e.srv.Name)
}

// Network is the network approval around the execute step: when the
// tool's egress proxy refused a host:port it does not allow while the
// call ran, the call's result becomes an approval of type network
// (where a person can be asked): approved, the host:port is allowed for
// the session and the call runs again through Ask.Execute (this wrapper
// included, so a run that meets another refused host asks again);
// "always" also adds it to the allow list in .pml.json. A call during
// which nothing was refused returns as Next answered it.
type Network struct {
	Next Handler
	Ask  *Approver
}

func (n Network) Call(ctx context.Context, c *Call) Result {
	// The refusals are counted from the execute step's start. Its install
	// goes through a proxy of its own (install:NAME), never the tool's;
	// a server started by this call (its first) is the tool's own
	// doing in this call.
	since := time.Now()
	res := n.Next.Call(ctx, c)
	if ask, ok := n.Ask.networkApproval(ctx, c, since, res); ok {
		return ask
	}
	return res
}

// networkApproval opens the network approval of c when its tool's proxy
// refused a host from since on; ok is false when it did not (or the
// approval could not be put to anyone: hil.require_elicitation without a
// dialog leaves the tool's own result).
func (ap *Approver) networkApproval(ctx context.Context, c *Call, since time.Time, res Result) (Result, bool) {
	tool, args, pattern := c.Tool, c.Args, c.Pattern
	eg := ap.egressOf(tool)
	id := eg.id
	if id == "" {
		return Result{}, false
	}
	ep := ap.Egress.Lookup(id)
	if ep == nil {
		return Result{}, false
	}
	hosts := ep.RefusedSince(since)
	if len(hosts) == 0 || ap.Config.HIL.RequireElicitation && c.Req.Ask == nil && !c.Req.Dialog {
		return Result{}, false
	}
	who, key := eg.names()
	if c.RawArgs {
		// A fast-path call (mcpserve/fastpath.go) kept its arguments as bytes: the
		// person sees them, and the call runs again from them.
		c.DecodeArgs()
		args = c.Args
	}
	wf := c.Req.Workflows.Create(ApprovalNetwork, tool, args, pattern)
	wf.Data = &networkGrant{id: id, who: who, key: key, hosts: hosts}
	a := ap.Approval(wf)
	a.Description = fmt.Sprintf("%s (running %s%s) tried to connect to %s, which %s does not allow; pml's egress proxy refused it. Allow %s to connect to %s and run it again?",
		// The hosts are what a container asked the proxy for: quoted.
		shown(who), shown(tool), describeArgs(args), shown(strings.Join(hosts, ", ")), key, shown(who), shown(strings.Join(hosts, ", ")))
	a.Context["hosts"] = hosts
	a.Context["who"] = who
	a.Context["config_key"] = key
	if res.Text != "" {
		a.Context["result"] = truncateText(res.Text, 2000)
	}
	// The tool's own "always" (permissions.allow) is not what is asked.
	delete(a.Context, "always_not_offered")
	opts := []string{"continue", "abort"}
	if why := ap.networkAlwaysBlocked(key); why != "" {
		a.Context["always_not_offered"] = why
	} else {
		opts = []string{"continue", "always", "abort"}
		a.Context["always_adds"] = fmt.Sprintf("%s to %s in .pml.json", shown(strings.Join(hosts, ", ")), key)
	}
	a.Options = opts
	c.Note(audit.Entry{Tool: tool, Decision: audit.Asked, Pattern: pattern, WorkflowID: wf.ID, Reason: "network: " + strings.Join(hosts, ", "), ArgKeys: audit.Keys(args)})
	return ap.AskInDialog(ctx, c, wf, a), true
}

// networkAlwaysBlocked says why "always" could not keep its promise for
// key: sandbox.network.allow from pml's environment replaces the file's.
func (ap *Approver) networkAlwaysBlocked(key string) string {
	if key == "sandbox.network.allow" && os.Getenv("PML_SANDBOX_NETWORK_ALLOW") != "" {
		return "sandbox.network.allow comes from PML_SANDBOX_NETWORK_ALLOW in pml's environment, which replaces the file's list"
	}
	return ""
}

// Resume carries out the answer to a network approval: rejected, the
// call is not run again; approved, "always" saves the host:ports first
// (if that fails nothing runs), then they are allowed for the session
// and the call runs again.
func (g *networkGrant) Resume(ctx context.Context, ap *Approver, c *Call, wfs *Workflows, wf *Workflow, ans Answer) Result {
	if !ans.Approved {
		return ap.reject(c, wfs, wf, ans)
	}
	always := ans.Always
	decision := audit.Approved
	if always {
		if why := ap.networkAlwaysBlocked(g.key); why != "" {
			wfs.Release(wf)
			c.Note(audit.Entry{Tool: wf.Tool, Decision: audit.Failed, WorkflowID: wf.ID, Reason: "always cannot be kept"})
			return errorResult(fmt.Errorf("%w: \"always\" is not offered here: %s; %s. Answer again with always: false to allow it for this session", call.ErrInvalidInput, why, notRun(wf)))
		}
		err := ap.writeConfig(func(old []byte) ([]byte, error) {
			cur := old
			for _, h := range g.hosts {
				out, err := config.AddNetworkAllowData(ap.Config.Path, cur, g.key, h)
				if err != nil {
					return nil, err
				}
				if out != nil {
					cur = out
				}
			}
			if cur == nil {
				return nil, errors.New("nothing to write")
			}
			return cur, nil
		})
		if err != nil {
			wfs.Release(wf)
			c.Note(audit.Entry{Tool: wf.Tool, Decision: audit.Failed, WorkflowID: wf.ID, Reason: "could not save always"})
			return errorResult(fmt.Errorf("could not add %s to %s: %v; %s. Answer again with always: false to allow it for this session", strings.Join(g.hosts, ", "), g.key, err, notRun(wf)))
		}
		decision = audit.Always
	}
	if ep := ap.Egress.Lookup(g.id); ep != nil {
		if err := ep.Grant(g.hosts); err != nil {
			wfs.Release(wf)
			return errorResult(err)
		}
	}
	wfs.Finish(wf)
	ap.Log.Info().Str("who", g.who).Strs("hosts", g.hosts).Bool("always", always).Msg("network approved")
	return ap.run(ctx, c, wf, decision)
}

// notRun says what of wf's call ran when it is not run (again): nothing,
// except for a network approval, whose call ran once up to the refused
// connection.
func notRun(wf *Workflow) string {
	if g, ok := wf.Data.(*networkGrant); ok {
		return fmt.Sprintf("%s ran once, up to its refused connection to %s, and was not run again", wf.Tool, strings.Join(g.hosts, ", "))
	}
	return wf.Tool + " was not run"
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
