package config

import (
	"strings"
	"testing"
)

func TestServerNetworkIsReadAndChecked(t *testing.T) {
	cfg, err := Load(write(t, `{"mcps": {"gh": {"image": "x", "network": {"allow": ["api.github.com:443", "*.example.org"], "forward": {"127.0.0.1:5432": "db.internal:5432"}}}}}`), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Servers["gh"].Network.Rules
	if len(r.Allow) != 3 || len(r.Forward) != 1 || r.Forward[0].ListenPort != 5432 || r.Forward[0].Target.Host != "db.internal" {
		t.Fatalf("%+v", r)
	}
	if _, ok := r.Find("db.internal", 5432); !ok {
		t.Error("a forward's target is not allowed")
	}
	if _, ok := r.Find("example.org", 443); ok {
		t.Error("*.example.org matched example.org itself")
	}
	if _, ok := r.Find("a.b.example.org", 80); !ok {
		t.Error("*.example.org without a port does not allow port 80 of a subdomain")
	}
	if _, ok := r.Find("API.GitHub.com.", 443); !ok {
		t.Error("names are compared case-insensitively, without the trailing dot")
	}
}

func TestBadNetworkEntriesAreClearErrors(t *testing.T) {
	for _, c := range []struct{ network, want string }{
		{`{"allow": "api.github.com"}`, "must be a list of strings"},
		{`{"allow": ["api.github.com:99999"]}`, "port \"99999\" must be a number from 1 to 65535"},
		{`{"allow": ["*.com"]}`, "whole top-level domain"},
		{`{"allow": ["a.*.example.org"]}`, "'*' is allowed only as a whole first label"},
		{`{"allow": ["*.10.0.0.1"]}`, "a wildcard applies to names, not addresses"},
		{`{"allow": ["https://x.org/"]}`, "is a URL"},
		{`{"allow": [""]}`, "empty entry"},
		{`{"forward": {"0.0.0.0:5432": "db:5432"}}`, "must be 127.0.0.1:PORT"},
		{`{"forward": {"127.0.0.1:5432": "db"}}`, "needs a port"},
		{`{"forward": {"127.0.0.1:5432": "*.db:5432"}}`, "not a wildcard"},
		{`{"allowed": []}`, `unknown key`},
		{`[]`, "must be an object"},
	} {
		_, err := Load(write(t, `{"mcps": {"gh": {"image": "x", "network": `+c.network+`}}}`), noEnv)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "mcps.gh.network") {
			t.Errorf("%s: %v, want an error naming mcps.gh.network with %q", c.network, err, c.want)
		}
	}
	_, err := Load(write(t, `{"sandbox": {"network": {"forward": {"127.0.0.1:1": "a:1", "127.0.0.1:01": "b:1"}}}}`), noEnv)
	if err == nil || !strings.Contains(err.Error(), "forwarded twice") || !strings.Contains(err.Error(), "sandbox.network") {
		t.Errorf("a port forwarded twice: %v", err)
	}
}

func TestAddNetworkAllowKeepsTheRest(t *testing.T) {
	in := []byte(`{"z": 1, "mcps": {"gh": {"image": "x", "network": {"allow": ["a.org:443"]}}}}`)
	out, err := AddNetworkAllowData("p", in, "mcps.gh.network.allow", "b.org:443")
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"z\": 1,\n  \"mcps\": {\n    \"gh\": {\n      \"image\": \"x\",\n      \"network\": {\n        \"allow\": [\n          \"a.org:443\",\n          \"b.org:443\"\n        ]\n      }\n    }\n  }\n}\n"
	if string(out) != want {
		t.Errorf("got\n%s", out)
	}
	if again, err := AddNetworkAllowData("p", out, "mcps.gh.network.allow", "b.org:443"); again != nil || err != nil {
		t.Errorf("adding twice: %s %v", again, err)
	}
	out, err = AddNetworkAllowData("p", nil, "sandbox.network.allow", "c.org:80")
	if err != nil || !strings.Contains(string(out), `"c.org:80"`) {
		t.Errorf("no file: %s %v", out, err)
	}
}
