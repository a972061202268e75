package term

import (
	"os"
	"path/filepath"
	"testing"
)

// A file that is not a terminal has no width (the progress renderer then
// assumes 80 columns) and no echo to turn off (the key prompt then says
// the input will be visible).
func TestAFileIsNoTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if w := Width(f.Fd()); w != 0 {
		t.Errorf("width %d", w)
	}
	if restore, err := HideInput(int(f.Fd())); err == nil {
		restore()
		t.Error("echo turned off on a plain file")
	}
}
