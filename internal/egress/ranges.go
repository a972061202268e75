package egress

import "net/netip"

// internalRanges are the addresses a public name must not lead to: a
// name in an allow list that resolves here would open the machine's own
// services or its network (DNS rebinding). Only an entry naming the host
// or address itself opens them.
var internalRanges = []struct {
	prefix netip.Prefix
	why    string
}{
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local: cloud metadata services live here"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (RFC 1918)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (RFC 1918)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (RFC 1918)"},
	{netip.MustParsePrefix("fc00::/7"), "private (unique local)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("0.0.0.0/8"), "this network"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// Internal says why a is an internal address, or "" for a public one.
func Internal(a netip.Addr) string {
	a = a.Unmap()
	for _, r := range internalRanges {
		if r.prefix.Contains(a) {
			return r.why
		}
	}
	return ""
}

// never: addresses no entry opens (nothing is reached there by
// connecting).
func never(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsUnspecified() || a.IsMulticast() || netip.MustParsePrefix("0.0.0.0/8").Contains(a)
}
