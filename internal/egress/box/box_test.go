package box

import (
	"net/netip"
	"testing"
)

func TestHostsFileAndDefaultGateway(t *testing.T) {
	hosts := "127.0.0.1\tlocalhost\n# 10.0.0.9 host.docker.internal\n<nil>\thost.docker.internal\n172.17.0.1 Host.Docker.Internal other\n"
	if got := hostsFile(hosts, "host.docker.internal"); len(got) != 1 || got[0] != netip.MustParseAddr("172.17.0.1") {
		t.Errorf("hostsFile = %v", got)
	}
	route := "Iface\tDestination\tGateway \tFlags\neth1\t00001CAC\t00000000\t0001\neth0\t00000000\t010011AC\t0003\n"
	if a, ok := defaultGateway(route); !ok || a != netip.MustParseAddr("172.17.0.1") {
		t.Errorf("defaultGateway = %v %v", a, ok)
	}
}
