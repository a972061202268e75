package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/pml-dev/pml/internal/netallow"
)

// Network is the network a server (mcps.NAME.network) or shell:exec
// (sandbox.network) gets through pml's egress proxy. Empty: none, as
// without it.
type Network struct {
	// Allow is network.allow as written ("api.github.com:443").
	Allow []string
	// Forward is network.forward: a loopback port in the container →
	// host:port.
	Forward map[string]string
	// Rules is both, parsed and checked.
	Rules netallow.Rules
}

// Empty reports whether no network is given.
func (n Network) Empty() bool { return n.Rules.Empty() }

// parse checks Allow and Forward into Rules; it returns the problems of
// each, one per line.
func (n *Network) parse() (allowErr, forwardErr error) {
	allow, err1 := netallow.ParseList(n.Allow)
	fwd, err2 := netallow.ParseForwards(n.Forward)
	if err1 != nil || err2 != nil {
		return err1, err2
	}
	n.Rules = netallow.Rules{Allow: allow, Forward: fwd}
	return nil, nil
}

func oneLine(err error) error { return errors.New(strings.ReplaceAll(err.Error(), "\n", "; ")) }

// networkHint ends every network error: what a valid value looks like.
const networkHint = ` (e.g. {"allow": ["api.github.com:443", "*.example.org"], "forward": {"127.0.0.1:5432": "db.internal:5432"}})`

// readNetwork reads a server's network object (absent: no network).
func readNetwork(dst *Network) func(any) error {
	return func(v any) error {
		*dst = Network{}
		if v == nil {
			return nil
		}
		m, ok := v.(map[string]any)
		if !ok {
			return errors.New("must be an object" + networkHint + ", not " + typeName(v))
		}
		for k := range m {
			if k != "allow" && k != "forward" {
				return &partError{"." + k, errors.New("unknown key: network has \"allow\" and \"forward\"" + networkHint)}
			}
		}
		allow, err := stringList(m["allow"], ` ("host:port")`, ` such as ["api.github.com:443"]`)
		if err != nil {
			return &partError{".allow", err}
		}
		fwd, err := decodeForward(m["forward"], false)
		if err != nil {
			return &partError{".forward", err}
		}
		dst.Allow, dst.Forward = allow, fwd
		aerr, ferr := dst.parse()
		if aerr != nil {
			return &partError{".allow", oneLine(aerr)}
		}
		if ferr != nil {
			return &partError{".forward", oneLine(ferr)}
		}
		return nil
	}
}

// decodeForward reads a forward object; from the environment it is
// "127.0.0.1:5432=db.internal:5432,..." .
func decodeForward(v any, fromEnv bool) (map[string]string, error) {
	out := map[string]string{}
	switch t := v.(type) {
	case nil:
		return nil, nil
	case string:
		if !fromEnv {
			break
		}
		for _, pair := range splitList(t) {
			l, r, ok := strings.Cut(pair, "=")
			if !ok {
				return nil, fmt.Errorf("%q must be 127.0.0.1:PORT=host:port", pair)
			}
			out[strings.TrimSpace(l)] = strings.TrimSpace(r)
		}
		return out, nil
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			s, ok := t[k].(string)
			if !ok {
				return nil, fmt.Errorf("%q must map to a string \"host:port\", not %s", k, typeName(t[k]))
			}
			out[k] = s
		}
		return out, nil
	}
	return nil, errors.New("must be an object {\"127.0.0.1:PORT\": \"host:port\"}, not " + typeName(v))
}

// sandboxNetwork checks sandbox.network once both of its keys are read.
func sandboxNetwork(cfg *Config) []error {
	aerr, ferr := cfg.Sandbox.Network.parse()
	var errs []error
	for _, e := range []struct {
		key string
		err error
	}{{"sandbox.network.allow", aerr}, {"sandbox.network.forward", ferr}} {
		if e.err != nil {
			errs = append(errs, &Error{File: cfg.Path, Key: e.key, Problem: oneLine(e.err).Error()})
		}
	}
	return errs
}

// decodeHostList reads sandbox.network.allow; the environment gives it
// comma separated.
func decodeHostList(v any, fromEnv bool) ([]string, error) {
	if s, ok := v.(string); ok && fromEnv {
		return splitList(s), nil
	}
	return stringList(v, ` ("host:port")`, ` such as ["api.github.com:443"]`)
}

// NewNetwork checks allow and forward as network.allow and
// network.forward are (a registry entry's declared hosts).
func NewNetwork(allow []string, forward map[string]string) (Network, error) {
	n := Network{Allow: allow, Forward: forward}
	aerr, ferr := n.parse()
	return n, errors.Join(aerr, ferr)
}

// Describe says what the network is, for a person approving it.
func (n Network) Describe() string {
	if n.Empty() {
		return "none"
	}
	parts := n.Rules.Strings()
	for _, f := range n.Rules.Forward {
		parts = append(parts, f.Listen+" → "+f.Target.Text)
	}
	return "only through pml's egress proxy, to " + strings.Join(parts, ", ")
}
