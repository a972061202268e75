//go:build k8s

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os/exec"
	"sort"
	"strings"
)

// Chain names. Everything this program adds to the host lives in chains with this prefix,
// reached by jumps that match only the pod network, so Docker's chains and traffic are untouched.
const (
	chainPrefix  = "PML-NP"
	chainForward = "PML-NP-FWD" // pod traffic being forwarded (pod to pod, pod to elsewhere)
	chainInput   = "PML-NP-IN"  // pod traffic to the host itself (API server, node ports)
)

// render returns iptables-restore input (for --noflush) that rewrites this program's chains to
// enforce rules, and deletes per-pod chains in stale that are no longer wanted.
func render(rules []podRules, stale []string) string {
	var b strings.Builder
	b.WriteString("*filter\n")
	fmt.Fprintf(&b, ":%s - [0:0]\n:%s - [0:0]\n", chainForward, chainInput)
	var body strings.Builder
	want := map[string]bool{}
	for _, r := range rules {
		if r.EgressIsolated {
			c := podChain("E", r)
			want[c] = true
			fmt.Fprintf(&b, ":%s - [0:0]\n", c)
			writeChain(&body, c, r.Egress, "-d")
		}
		if r.IngressIsolated {
			c := podChain("I", r)
			want[c] = true
			fmt.Fprintf(&b, ":%s - [0:0]\n", c)
			writeChain(&body, c, r.Ingress, "-s")
		}
	}
	// Replies and the rest of an allowed connection pass; a policy applies to new connections.
	fmt.Fprintf(&body, "-A %s -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n", chainForward)
	fmt.Fprintf(&body, "-A %s -m conntrack --ctstate INVALID -j DROP\n", chainForward)
	fmt.Fprintf(&body, "-A %s -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN\n", chainInput)
	for _, r := range rules {
		ip := r.IP.String() + "/32"
		if r.EgressIsolated {
			fmt.Fprintf(&body, "-A %s -s %s -j %s\n", chainForward, ip, podChain("E", r))
			fmt.Fprintf(&body, "-A %s -s %s -j %s\n", chainInput, ip, podChain("E", r))
		}
		if r.IngressIsolated {
			fmt.Fprintf(&body, "-A %s -d %s -j %s\n", chainForward, ip, podChain("I", r))
		}
	}
	// Whatever reaches the end was allowed by both ends' policies; the FORWARD chain's own
	// policy (DROP where Docker runs) must not drop it.
	fmt.Fprintf(&body, "-A %s -j ACCEPT\n", chainForward)
	b.WriteString(body.String())
	for _, c := range stale {
		if !want[c] {
			fmt.Fprintf(&b, "-F %s\n-X %s\n", c, c)
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// writeChain writes one pod's chain: each allowed flow returns to the caller (which goes on to
// the other end's checks); anything else is rejected at once so a dial fails fast.
func writeChain(b *strings.Builder, chain string, allows []allow, dir string) {
	fmt.Fprintf(b, "-A %s -m comment --comment %q\n", chain, "pml test cluster network policy")
	for _, a := range allows {
		var m []string
		if a.Peer.IsValid() {
			m = append(m, dir, a.Peer.String())
		}
		if a.Proto != "" {
			m = append(m, "-p", a.Proto)
			if a.Port != 0 {
				port := fmt.Sprint(a.Port)
				if a.EndPort != 0 {
					port += ":" + fmt.Sprint(a.EndPort)
				}
				m = append(m, "-m", a.Proto, "--dport", port)
			}
		}
		fmt.Fprintf(b, "-A %s %s -j RETURN\n", chain, strings.Join(m, " "))
	}
	fmt.Fprintf(b, "-A %s -p tcp -j REJECT --reject-with tcp-reset\n", chain)
	fmt.Fprintf(b, "-A %s -j REJECT --reject-with icmp-port-unreachable\n", chain)
}

// podChain names a pod's chain by a hash of its identity and address (chain names are
// limited to 28 characters).
func podChain(dir string, r podRules) string {
	h := sha256.Sum256([]byte(r.Namespace + "/" + r.Name + "/" + r.IP.String()))
	return fmt.Sprintf("%s-%s-%s", chainPrefix, dir, strings.ToUpper(hex.EncodeToString(h[:])[:12]))
}

// iptables runs the iptables command (Debian's, whichever backend the host uses, the same one
// Docker uses) and returns its output.
func iptables(args ...string) (string, error) {
	out, err := exec.Command("iptables", append([]string{"-w", "5"}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// ourChains lists this program's per-pod chains present in the filter table.
func ourChains() ([]string, error) {
	out, err := iptables("-t", "filter", "-S")
	if err != nil {
		return nil, err
	}
	var chains []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == "-N" && (strings.HasPrefix(f[1], chainPrefix+"-E-") || strings.HasPrefix(f[1], chainPrefix+"-I-")) {
			chains = append(chains, f[1])
		}
	}
	sort.Strings(chains)
	return chains, nil
}

// apply writes rules atomically and makes sure the jumps to them come first in FORWARD and
// INPUT (other programs, kube-proxy included, insert their own rules at the top).
func apply(rules []podRules, podCIDR netip.Prefix) error {
	stale, err := ourChains()
	if err != nil {
		return err
	}
	cmd := exec.Command("iptables-restore", "-w", "5", "--noflush")
	cmd.Stdin = strings.NewReader(render(rules, stale))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore: %v: %s", err, bytes.TrimSpace(out))
	}
	cidr := podCIDR.String()
	for _, j := range jumps(cidr) {
		if err := ensureFirst(j.chain, j.rule); err != nil {
			return err
		}
	}
	return nil
}

type jump struct {
	chain string
	rule  []string
}

func jumps(cidr string) []jump {
	return []jump{
		{"FORWARD", []string{"-s", cidr, "-j", chainForward}},
		{"FORWARD", []string{"-d", cidr, "-j", chainForward}},
		{"INPUT", []string{"-s", cidr, "-j", chainInput}},
	}
}

// ensureFirst puts rule among the first rules of chain, once.
func ensureFirst(chain string, rule []string) error {
	out, err := iptables("-S", chain)
	if err != nil {
		return err
	}
	want := "-A " + chain + " " + strings.Join(rule, " ")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// lines[0] is the chain's policy; our jumps must come before any other rule.
	for _, l := range lines[1:] {
		if l == want {
			return nil
		}
		if !strings.HasSuffix(l, " -j "+chainForward) && !strings.HasSuffix(l, " -j "+chainInput) {
			break
		}
	}
	for _, l := range lines {
		if l == want {
			if _, err := iptables(append([]string{"-D", chain}, rule...)...); err != nil {
				return err
			}
		}
	}
	_, err = iptables(append([]string{"-I", chain, "1"}, rule...)...)
	return err
}

// cleanup removes every jump and chain this program added.
func cleanup(podCIDR netip.Prefix) error {
	for _, j := range jumps(podCIDR.String()) {
		for {
			if _, err := iptables(append([]string{"-D", j.chain}, j.rule...)...); err != nil {
				break
			}
		}
	}
	chains, err := ourChains()
	if err != nil {
		return err
	}
	chains = append(chains, chainForward, chainInput)
	for _, c := range chains {
		_, _ = iptables("-F", c)
	}
	for _, c := range chains {
		_, _ = iptables("-X", c)
	}
	return nil
}
