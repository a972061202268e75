package audit

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// An entry is never longer than the room a call holds for it, whatever
// the caller chose to send: the longest names, characters JSON escapes
// to six bytes, free texts of megabytes.
func TestAnEntryFitsInTheRoomOfOneCall(t *testing.T) {
	esc := strings.Repeat("<\x01", 1<<16)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = esc
	}
	for name, e := range map[string]Entry{
		"escaped": {Tool: esc, Decision: Failed, Pattern: esc, WorkflowID: esc, ExitStatus: esc, ArgKeys: keys, Reason: esc, Limits: esc, NotDeclaredBy: esc, Net: &Net{Host: esc, Address: esc}},
		"long":    {Tool: strings.Repeat("t", 1<<20), Decision: Allowed, Reason: strings.Repeat("r", 1<<20), ArgKeys: []string{"path"}},
		"small":   {Tool: "filesystem:read_file", Decision: Allowed, ArgKeys: []string{"path"}},
	} {
		line, err := marshalBounded(e)
		if err != nil || len(line) >= MaxEntry || line[len(line)-1] != '\n' || strings.Count(string(line), "\n") != 1 {
			t.Errorf("%s: %d bytes (room %d), %v", name, len(line), MaxEntry, err)
		}
		if name == "small" && strings.Contains(string(line), "cut") {
			t.Errorf("a small entry was cut: %s", line)
		}
		if name == "long" && !strings.Contains(string(line), `"decision":"allowed"`) {
			t.Errorf("a cut entry lost its decision: %s", line)
		}
	}
}

// The room held for calls in flight is counted under -race: held while a
// call runs, given back once by its entry or by Release, whichever
// comes first and however often either is called.
func TestTicketsHoldRoomUntilTheEntry(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".pml", "audit.jsonl")
	l := New(path)
	defer l.Close()
	const calls = 200
	var wg sync.WaitGroup
	tks := make(chan *Ticket, calls)
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, err := l.Ready()
			if err != nil {
				t.Error(err)
				return
			}
			tks <- tk
		}()
	}
	wg.Wait()
	close(tks)
	if got := l.Held(); got != calls*MaxEntry {
		t.Fatalf("held %d after %d calls admitted, want %d", got, calls, calls*MaxEntry)
	}
	i := 0
	for tk := range tks {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i%2 == 0 {
				if err := tk.Record(Entry{Tool: "a", Decision: Allowed}); err != nil {
					t.Error(err)
				}
			}
			tk.Release()
			tk.Release()
		}(i)
		i++
	}
	wg.Wait()
	if got := l.Held(); got != 0 {
		t.Errorf("held %d after every call ended", got)
	}
	got, bad := readAll(t, path)
	if len(got) != calls/2 || len(bad) != 0 {
		t.Errorf("%d entries, bad %v", len(got), bad)
	}
	// The zero log admits every call and writes nothing.
	var zero *Log
	tk, err := zero.Ready()
	if err != nil || tk.Record(Entry{Tool: "a"}) != nil {
		t.Errorf("the zero log: %v", err)
	}
	tk.Release()
}
