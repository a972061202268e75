// Package netallow reads and matches the network rules of a server or of
// shell:exec (`network.allow`, `network.forward` in .pml.json): which
// host:port a container may reach through pml's egress proxy, and which
// of its own loopback ports pml forwards where. It is a leaf package: the
// config loader checks entries with it, the proxy decides with it.
package netallow

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// Default ports of an entry that names none: HTTPS and HTTP, the two a
// client of a web API uses.
var DefaultPorts = []int{443, 80}

// Entry is one allowed host (or address) and port.
type Entry struct {
	// Host is lowercase without a trailing dot; for a wildcard it is the
	// domain below which any name matches ("example.org" of
	// "*.example.org"). An IP literal is kept in its canonical form.
	Host     string
	Port     int
	Wildcard bool
	// Text is the entry as written, for messages.
	Text string
}

// String is host:port as a person writes it ("*.example.org:443").
func (e Entry) String() string {
	h := e.Host
	if e.Wildcard {
		h = "*." + h
	}
	return net.JoinHostPort(h, strconv.Itoa(e.Port))
}

// Matches reports whether the entry allows host (lowercase, no trailing
// dot) on port. A wildcard matches names below its domain only, never
// the domain itself nor an IP literal.
func (e Entry) Matches(host string, port int) bool {
	if port != e.Port {
		return false
	}
	if e.Wildcard {
		return strings.HasSuffix(host, "."+e.Host) && !isIP(host)
	}
	return host == e.Host
}

// Literal reports whether the entry names host itself (no wildcard): only
// such an entry opens a loopback, link-local or private address.
func (e Entry) Literal() bool { return !e.Wildcard }

// Forward is one declared port forward: connections to Listen inside the
// container reach Target.
type Forward struct {
	Listen     string // "127.0.0.1:5432"
	ListenPort int
	Target     Entry // its Target.Port is always set
}

// Rules are one server's (or shell:exec's) network rules. The zero value
// allows nothing.
type Rules struct {
	Allow   []Entry
	Forward []Forward
}

// Empty reports whether the rules give no network at all.
func (r Rules) Empty() bool { return len(r.Allow) == 0 && len(r.Forward) == 0 }

// Find returns the entry that allows host:port: an allow entry, or a
// forward's target (declaring a forward allows its target). Exact entries
// are preferred over wildcards, so a literal entry's private-address
// permission is found when both match.
func (r Rules) Find(host string, port int) (Entry, bool) {
	host = Canonical(host)
	var wild *Entry
	for i, e := range r.Allow {
		if e.Matches(host, port) {
			if !e.Wildcard {
				return e, true
			}
			if wild == nil {
				wild = &r.Allow[i]
			}
		}
	}
	for _, f := range r.Forward {
		if f.Target.Matches(host, port) {
			return f.Target, true
		}
	}
	if wild != nil {
		return *wild, true
	}
	return Entry{}, false
}

// With returns the rules plus the exact host:port entries extra (an
// approval given for this session).
func (r Rules) With(extra ...Entry) Rules {
	if len(extra) == 0 {
		return r
	}
	out := r
	out.Allow = append(append([]Entry(nil), r.Allow...), extra...)
	return out
}

// Strings lists the allow entries as written (each once).
func (r Rules) Strings() []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range r.Allow {
		if !seen[e.Text] {
			seen[e.Text] = true
			out = append(out, e.Text)
		}
	}
	return out
}

// Canonical is how hosts are compared: lowercase, no trailing dot, an IP
// in its canonical form, IPv6 without brackets.
func Canonical(host string) string {
	host = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(host)), ".")
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().String()
	}
	return host
}

func isIP(host string) bool {
	_, err := netip.ParseAddr(host)
	return err == nil
}

// Parse reads one allow entry: "host", "host:port", "*.domain[:port]",
// "1.2.3.4[:port]" or "[::1][:port]". Without a port it allows the
// default ports (443 and 80), as two entries.
func Parse(s string) ([]Entry, error) {
	text := s
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("an empty entry allows nothing; remove it")
	}
	if strings.Contains(s, "://") {
		return nil, fmt.Errorf("%q is a URL; write host or host:port (e.g. \"api.github.com:443\")", text)
	}
	host, port, hasPort, err := splitHostPort(s)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", text, err)
	}
	wild := false
	if strings.HasPrefix(host, "*.") {
		wild, host = true, host[2:]
	}
	host = Canonical(host)
	if err := checkHost(host, wild); err != nil {
		return nil, fmt.Errorf("%q: %w", text, err)
	}
	ports := DefaultPorts
	if hasPort {
		ports = []int{port}
	}
	out := make([]Entry, 0, len(ports))
	for _, p := range ports {
		out = append(out, Entry{Host: host, Port: p, Wildcard: wild, Text: text})
	}
	return out, nil
}

// ParseList reads a list of allow entries; every bad one is reported.
func ParseList(list []string) ([]Entry, error) {
	var out []Entry
	var errs []error
	for i, s := range list {
		es, err := Parse(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("[%d]: %w", i, err))
			continue
		}
		out = append(out, es...)
	}
	return out, errors.Join(errs...)
}

// ParseForward reads one forward: listen is "127.0.0.1:PORT" (a loopback
// port inside the container), target "host:port" (a port is required:
// a forward is a single connection, not a web API).
func ParseForward(listen, target string) (Forward, error) {
	lh, lp, ok, err := splitHostPort(strings.TrimSpace(listen))
	if err != nil || !ok {
		return Forward{}, fmt.Errorf("%q: the listening side must be 127.0.0.1:PORT", listen)
	}
	if a, err := netip.ParseAddr(lh); err != nil || !a.Is4() || !a.IsLoopback() || a != netip.MustParseAddr("127.0.0.1") {
		return Forward{}, fmt.Errorf("%q: the listening side must be 127.0.0.1:PORT (the container has only its loopback)", listen)
	}
	th, tp, ok, err := splitHostPort(strings.TrimSpace(target))
	if err != nil {
		return Forward{}, fmt.Errorf("%q: %w", target, err)
	}
	if !ok {
		return Forward{}, fmt.Errorf("%q: a forward's target needs a port (host:port)", target)
	}
	if strings.HasPrefix(th, "*") {
		return Forward{}, fmt.Errorf("%q: a forward's target is one host, not a wildcard", target)
	}
	th = Canonical(th)
	if err := checkHost(th, false); err != nil {
		return Forward{}, fmt.Errorf("%q: %w", target, err)
	}
	return Forward{Listen: "127.0.0.1:" + strconv.Itoa(lp), ListenPort: lp,
		Target: Entry{Host: th, Port: tp, Text: target}}, nil
}

// ParseForwards reads a forward object (listen → target), sorted by
// listening port; every bad pair is reported, and so is a port used twice.
func ParseForwards(m map[string]string) ([]Forward, error) {
	var out []Forward
	var errs []error
	seen := map[int]bool{}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f, err := ParseForward(k, m[k])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[f.ListenPort] {
			errs = append(errs, fmt.Errorf("%q: port %d is forwarded twice", k, f.ListenPort))
			continue
		}
		seen[f.ListenPort] = true
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ListenPort < out[j].ListenPort })
	return out, errors.Join(errs...)
}

// splitHostPort splits "host[:port]", "[v6][:port]" or a bare IPv6.
func splitHostPort(s string) (host string, port int, hasPort bool, err error) {
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		h, p, err := net.SplitHostPort(s)
		if err != nil {
			if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
				return s[1 : len(s)-1], 0, false, nil
			}
			return "", 0, false, errors.New("not host:port")
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", 0, false, fmt.Errorf("port %q must be a number from 1 to 65535", p)
		}
		return h, n, true, nil
	}
	return s, 0, false, nil
}

// checkHost accepts an IP literal or a DNS name (letters, digits, '-',
// '_' and dots); a wildcard needs a name with at least one dot below it
// ("*.com" would open a whole top-level domain).
func checkHost(host string, wild bool) error {
	if host == "" {
		return errors.New("no host")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if wild {
			return errors.New("a wildcard applies to names, not addresses")
		}
		if a.IsUnspecified() || a.IsMulticast() {
			return fmt.Errorf("%s is not an address one connects to", host)
		}
		return nil
	}
	if strings.Contains(host, "*") {
		return errors.New("'*' is allowed only as a whole first label (\"*.example.org\")")
	}
	if len(host) > 253 {
		return errors.New("the name is longer than 253 characters")
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 {
			return errors.New("not a host name (an empty or over-long label)")
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return fmt.Errorf("not a host name (%q is not allowed in one)", r)
			}
		}
	}
	if wild && !strings.Contains(host, ".") {
		return fmt.Errorf("\"*.%s\" would allow a whole top-level domain; name the domain (\"*.example.%s\")", host, host)
	}
	return nil
}
