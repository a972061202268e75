//go:build k8s

package main

import (
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// allow is one permitted flow seen from an isolated pod: the other end (a prefix; a pod is a
// /32) and, when Proto is set, one protocol and port range. A zero Proto allows every port.
type allow struct {
	Peer    netip.Prefix // zero: any address
	Proto   string       // "tcp", "udp", "sctp" or "" (all)
	Port    int32        // 0 with a Proto: every port of that protocol
	EndPort int32        // 0: just Port
}

// podRules is what one pod may do. Isolated=false in a direction means no policy selects the
// pod for it, so everything is allowed that way (Kubernetes' default).
type podRules struct {
	IP              netip.Addr
	Namespace, Name string
	IngressIsolated bool
	EgressIsolated  bool
	Ingress, Egress []allow
}

// snapshot is the cluster state the rules are computed from.
type snapshot struct {
	Pods       []*corev1.Pod
	Namespaces []*corev1.Namespace
	Policies   []*networkingv1.NetworkPolicy
}

// podIP returns the pod's IPv4 address when it has one on the pod network; host-network and
// finished pods are not enforced (they have no address of their own, or no traffic).
func podIP(p *corev1.Pod, podCIDR netip.Prefix) (netip.Addr, bool) {
	if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return netip.Addr{}, false
	}
	for _, ip := range p.Status.PodIPs {
		a, err := netip.ParseAddr(ip.IP)
		if err == nil && a.Is4() && podCIDR.Contains(a) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// selects reports whether sel matches set; a selector that does not parse matches nothing, so
// a policy the enforcer cannot read never widens what is allowed.
func selects(sel *metav1.LabelSelector, set map[string]string) bool {
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(set))
}

// policyTypes applies the API's rule for a policy without policyTypes: Ingress always, Egress
// when it has egress rules.
func policyTypes(np *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(np.Spec.PolicyTypes) == 0 {
		return true, len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

// compute turns the snapshot into per-pod rules, sorted by pod address.
func compute(s snapshot, podCIDR netip.Prefix) []podRules {
	nsLabels := map[string]map[string]string{}
	for _, ns := range s.Namespaces {
		nsLabels[ns.Name] = ns.Labels
	}
	type live struct {
		pod *corev1.Pod
		ip  netip.Addr
	}
	var pods []live
	for _, p := range s.Pods {
		if ip, ok := podIP(p, podCIDR); ok {
			pods = append(pods, live{p, ip})
		}
	}
	// peers resolves a rule's peer list to prefixes, each with the pod it names (nil for an
	// ipBlock) so named ports can be resolved against that pod.
	type peer struct {
		prefix netip.Prefix
		pod    *corev1.Pod
	}
	peersOf := func(np *networkingv1.NetworkPolicy, list []networkingv1.NetworkPolicyPeer) []peer {
		var out []peer
		for _, pr := range list {
			if pr.IPBlock != nil {
				cidr, err := netip.ParsePrefix(pr.IPBlock.CIDR)
				if err != nil || !cidr.Addr().Is4() {
					continue
				}
				var except []netip.Prefix
				for _, e := range pr.IPBlock.Except {
					if ep, err := netip.ParsePrefix(e); err == nil {
						except = append(except, ep)
					}
				}
				for _, px := range subtract(cidr.Masked(), except) {
					out = append(out, peer{prefix: px})
				}
				continue
			}
			for _, lp := range pods {
				if pr.NamespaceSelector != nil {
					if !selects(pr.NamespaceSelector, nsLabels[lp.pod.Namespace]) {
						continue
					}
				} else if lp.pod.Namespace != np.Namespace {
					continue
				}
				if pr.PodSelector != nil && !selects(pr.PodSelector, lp.pod.Labels) {
					continue
				}
				out = append(out, peer{prefix: netip.PrefixFrom(lp.ip, 32), pod: lp.pod})
			}
		}
		return out
	}

	var out []podRules
	for _, lp := range pods {
		r := podRules{IP: lp.ip, Namespace: lp.pod.Namespace, Name: lp.pod.Name}
		for _, np := range s.Policies {
			if np.Namespace != lp.pod.Namespace || !selects(&np.Spec.PodSelector, lp.pod.Labels) {
				continue
			}
			in, eg := policyTypes(np)
			if in {
				r.IngressIsolated = true
				for _, rule := range np.Spec.Ingress {
					// Ports on ingress name the isolated pod's own ports.
					ports := resolvePorts(rule.Ports, lp.pod)
					if len(rule.From) == 0 {
						r.Ingress = append(r.Ingress, withPeer(netip.Prefix{}, ports)...)
						continue
					}
					for _, p := range peersOf(np, rule.From) {
						r.Ingress = append(r.Ingress, withPeer(p.prefix, ports)...)
					}
				}
			}
			if eg {
				r.EgressIsolated = true
				for _, rule := range np.Spec.Egress {
					if len(rule.To) == 0 {
						// Named ports cannot be resolved without a peer pod: such a port
						// allows nothing here, which errs on the closed side.
						r.Egress = append(r.Egress, withPeer(netip.Prefix{}, resolvePorts(rule.Ports, nil))...)
						continue
					}
					for _, p := range peersOf(np, rule.To) {
						r.Egress = append(r.Egress, withPeer(p.prefix, resolvePorts(rule.Ports, p.pod))...)
					}
				}
			}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IP.Less(out[j].IP) })
	return out
}

// portSet is a rule's resolved ports; all=true when the rule lists none.
type portSet struct {
	all   bool
	ports []allow // Peer unset
}

func resolvePorts(ports []networkingv1.NetworkPolicyPort, pod *corev1.Pod) portSet {
	if len(ports) == 0 {
		return portSet{all: true}
	}
	var ps portSet
	for _, p := range ports {
		proto := "tcp"
		if p.Protocol != nil {
			switch *p.Protocol {
			case corev1.ProtocolUDP:
				proto = "udp"
			case corev1.ProtocolSCTP:
				proto = "sctp"
			}
		}
		if p.Port == nil {
			ps.ports = append(ps.ports, allow{Proto: proto})
			continue
		}
		if p.Port.IntVal != 0 || p.Port.StrVal == "" {
			a := allow{Proto: proto, Port: p.Port.IntVal}
			if p.EndPort != nil && *p.EndPort > a.Port {
				a.EndPort = *p.EndPort
			}
			ps.ports = append(ps.ports, a)
			continue
		}
		if pod == nil {
			continue
		}
		for _, c := range pod.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == p.Port.StrVal && (cp.Protocol == "" && proto == "tcp" || string(cp.Protocol) == map[string]string{"tcp": "TCP", "udp": "UDP", "sctp": "SCTP"}[proto]) {
					ps.ports = append(ps.ports, allow{Proto: proto, Port: cp.ContainerPort})
				}
			}
		}
	}
	return ps
}

func withPeer(peer netip.Prefix, ps portSet) []allow {
	if ps.all {
		return []allow{{Peer: peer}}
	}
	out := make([]allow, 0, len(ps.ports))
	for _, p := range ps.ports {
		p.Peer = peer
		out = append(out, p)
	}
	return out
}

// subtract returns prefixes covering p minus every prefix in except, by halving p until each
// half is either clear of the exceptions or wholly inside one.
func subtract(p netip.Prefix, except []netip.Prefix) []netip.Prefix {
	for _, e := range except {
		e = e.Masked()
		if !p.Overlaps(e) {
			continue
		}
		if e.Bits() <= p.Bits() { // e covers p
			return nil
		}
		lo := netip.PrefixFrom(p.Addr(), p.Bits()+1)
		hiAddr := p.Addr().As4()
		bit := p.Bits()
		hiAddr[bit/8] |= 0x80 >> (bit % 8)
		hi := netip.PrefixFrom(netip.AddrFrom4(hiAddr), p.Bits()+1)
		return append(subtract(lo, except), subtract(hi, except)...)
	}
	return []netip.Prefix{p}
}
