package config

import (
	"strings"
	"testing"
)

// TestCapabilitiesKeyReadsTheSeedsNames: capabilities takes the names as
// the seeds write them; a bad item is an error naming capabilities[i].
func TestCapabilitiesKeyReadsTheSeedsNames(t *testing.T) {
	cfg := loadPair(t, `{"capabilities": ["smartSearch@1.2.0", "db.query", "casys.pml.smartSearch", "notes@latest"]}`, "")
	if got := strings.Join(cfg.Capabilities, " "); got != "smartSearch@1.2.0 db.query casys.pml.smartSearch notes@latest" {
		t.Fatalf("capabilities = %q", got)
	}
	if c, _ := ClassOf("capabilities"); c != Granting {
		t.Errorf("capabilities is classed %v, want granting: it runs registry code", c)
	}
	for _, c := range []struct{ doc, key, says string }{
		{`{"capabilities": ["ok", "a.b.c.d.e.f"]}`, `"capabilities[1]"`, "6 dot-separated parts"},
		{`{"capabilities": ["notes@", "x"]}`, `"capabilities[0]"`, "nothing after @"},
		{`{"capabilities": ["shell"]}`, `"capabilities[0]"`, "built-in namespace"},
		{`{"capabilities": ["smartSearch", "smartsearch@1.2.0"]}`, `"capabilities[1]"`, "as capabilities[0] does"},
		{`{"capabilities": "notes"}`, `"capabilities"`, "list"},
	} {
		_, err := Parse("/ws/.pml.json", []byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want one naming %s and saying %q", c.doc, err, c.key, c.says)
		}
	}
}

// TestCapabilitiesAreGrantsHeldUntilTrusted: each named capability is a
// grant of its own; untrusted, Restrict drops it (so it is never fetched).
func TestCapabilitiesAreGrantsHeldUntilTrusted(t *testing.T) {
	cfg := loadPair(t, `{"capabilities": ["notes@latest", "db.query"]}`, "")
	if got := grantKeys(GrantsBeyond(cfg, nil)); got != "capabilities=notes@latest capabilities=db.query" {
		t.Fatalf("grants %q", got)
	}
	r := Restrict(cfg, nil, func(g Grant) bool { return g.Key == "capabilities=db.query" })
	if got := strings.Join(r.Capabilities, " "); got != "db.query" {
		t.Errorf("restricted to %q, want only the trusted db.query", got)
	}
	if r := Restrict(cfg, nil, func(Grant) bool { return false }); len(r.Capabilities) != 0 {
		t.Errorf("untrusted, capabilities %q still apply", r.Capabilities)
	}
}

// TestAddAndRemoveCapabilityData: pml add writes the name into the list
// (replacing another version of the same entry) keeping every other key;
// pml remove takes out every item naming the entry.
func TestAddAndRemoveCapabilityData(t *testing.T) {
	const path = "/ws/.pml.json"
	in := []byte(`{"permissions": {"allow": ["x:*"]}, "capabilities": ["db.query", "smartsearch@1.0.0"], "zz": 1}`)
	out, err := AddCapabilityData(path, in, "smartSearch@1.2.0")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(path, out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := strings.Join(cfg.Capabilities, " "); got != "db.query smartSearch@1.2.0" {
		t.Errorf("after add: %q\n%s", got, out)
	}
	if !strings.Contains(string(out), `"zz": 1`) || strings.Index(string(out), "permissions") > strings.Index(string(out), "capabilities") {
		t.Errorf("other keys moved or lost:\n%s", out)
	}
	if again, _ := AddCapabilityData(path, out, "smartSearch@1.2.0"); again != nil {
		t.Errorf("adding it again rewrote the file:\n%s", again)
	}
	fresh, err := AddCapabilityData(path, nil, "notes")
	if err != nil || !strings.Contains(string(fresh), `"capabilities": [`) {
		t.Fatalf("no file: %v\n%s", err, fresh)
	}
	gone, err := RemoveCapabilityData(path, out, "smartsearch")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = Parse(path, gone)
	if err != nil || strings.Join(cfg.Capabilities, " ") != "db.query" {
		t.Errorf("after remove: %v %q\n%s", err, cfg.Capabilities, gone)
	}
	if none, _ := RemoveCapabilityData(path, gone, "smartSearch"); none != nil {
		t.Errorf("removing what is not there rewrote the file")
	}
}
