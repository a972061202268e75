package entrygrant

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCoversOnlyWhatWasGranted(t *testing.T) {
	granted := Grant{Namespace: "exf", Kind: "stdio", Env: []string{"B", "A"}, Hosts: []string{"h:443"}, Image: "img"}.Normal()
	for _, c := range []struct {
		name string
		want Grant
		ok   bool
	}{
		{"the same", Grant{Kind: "stdio", Env: []string{"A", "B"}, Hosts: []string{"h:443"}, Image: "img"}, true},
		{"fewer variables", Grant{Kind: "stdio", Env: []string{"A"}, Image: "img"}, true},
		{"one more variable", Grant{Kind: "stdio", Env: []string{"A", "B", "C"}, Hosts: []string{"h:443"}, Image: "img"}, false},
		{"another host", Grant{Kind: "stdio", Env: []string{"A"}, Hosts: []string{"other:443"}, Image: "img"}, false},
		{"another image", Grant{Kind: "stdio", Env: []string{"A"}, Image: "img2"}, false},
		{"another kind", Grant{Kind: "http", Env: []string{"A"}, Image: "img"}, false},
	} {
		if got := granted.Covers(c.want.Normal()); got != c.ok {
			t.Errorf("%s: Covers = %v, want %v", c.name, got, c.ok)
		}
	}
}

func TestEmptyGrantsNeedNoQuestion(t *testing.T) {
	if !(Grant{Kind: "http", Hosts: []string{"cloud", "api"}}).Empty() {
		t.Error("an http entry without variables sends nothing of the machine")
	}
	if (Grant{Kind: "http", Env: []string{"K"}}).Empty() || (Grant{Kind: "stdio", Hosts: []string{"h:1"}}).Empty() || (Grant{Kind: "stdio", Image: "i"}).Empty() {
		t.Error("a variable, a server's network or an image is a grant")
	}
}

func TestDescribeNamesVariablesAndHostsInOrder(t *testing.T) {
	d := Grant{Kind: "http", Env: []string{"K2", "K1"}, Hosts: []string{"cloud.example:8443", "api.example"}}.Normal().Describe()
	if !strings.Contains(d, "K1, K2") || !strings.Contains(d, "cloud.example:8443, which forwards them to api.example") {
		t.Errorf("Describe: %s", d)
	}
}

func TestRecordIsPrivateAndKeyedByWorkspace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pml")
	s := Open(dir)
	g := Grant{Namespace: "exf", Kind: "http", Env: []string{"K"}, Hosts: []string{"c", "a"}}
	if ok, err := s.Granted("/ws/one", g); ok || err != nil {
		t.Fatalf("before any record: %v %v", ok, err)
	}
	if err := s.Record("/ws/one", g); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Granted("/ws/one", g); !ok || err != nil {
		t.Fatalf("after the record: %v %v", ok, err)
	}
	if ok, _ := s.Granted("/ws/two", g); ok {
		t.Fatal("a grant of one workspace holds in another")
	}
	st, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("the record is %v, want 0600", st.Mode().Perm())
	}
	// A store another user could write grants nothing.
	if err := os.Chmod(filepath.Join(dir, FileName), 0o666); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Granted("/ws/one", g); ok || err == nil {
		t.Fatalf("a world-writable record was honoured: %v %v", ok, err)
	}
}

func TestMemoryStoreForgetsWithTheProcess(t *testing.T) {
	m := Memory()
	g := Grant{Namespace: "exf", Kind: "stdio", Image: "i"}
	if err := m.Record("/ws", g); err != nil {
		t.Fatal(err)
	}
	if ok, _ := m.Granted("/ws", g); !ok {
		t.Fatal("memory store lost a grant")
	}
	if ok, _ := Memory().Granted("/ws", g); ok {
		t.Fatal("a new memory store holds a grant")
	}
}

// Restore puts a namespace's grant back as it was before a failed pml
// add recorded another: the earlier grant, or none.
func TestRestorePutsTheGrantBack(t *testing.T) {
	for _, s := range []*Store{Open(filepath.Join(t.TempDir(), "pml")), Memory()} {
		first := Grant{Namespace: "exf", Kind: "stdio", Env: []string{"A"}}
		wider := Grant{Namespace: "exf", Kind: "stdio", Env: []string{"A", "B"}}
		if err := s.Record("/ws", first); err != nil {
			t.Fatal(err)
		}
		prev, err := s.Lookup("/ws", "exf")
		if err != nil || prev == nil {
			t.Fatalf("after the record: %v %v", prev, err)
		}
		if err := s.Record("/ws", wider); err != nil {
			t.Fatal(err)
		}
		if err := s.Restore("/ws", "exf", prev); err != nil {
			t.Fatal(err)
		}
		if ok, _ := s.Granted("/ws", wider); ok {
			t.Errorf("%q: the wider grant holds after Restore", s.Path)
		}
		if ok, _ := s.Granted("/ws", first); !ok {
			t.Errorf("%q: the earlier grant is gone after Restore", s.Path)
		}
		if err := s.Restore("/ws", "exf", nil); err != nil {
			t.Fatal(err)
		}
		if g, err := s.Lookup("/ws", "exf"); g != nil || err != nil {
			t.Errorf("%q: Restore(nil) left %+v (%v)", s.Path, g, err)
		}
	}
}
