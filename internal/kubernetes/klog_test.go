package kubernetes

import (
	"errors"
	"io"
	"os"
	"testing"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// TestClientGoLogStaysOffStderr: client-go reports a stream closed under
// a removed pod through HandleError at error severity; before quietKlog
// set a discarding logger, those lines reached pml's stderr ("Unhandled
// Error") among pml's own JSON log.
func TestClientGoLogStaysOffStderr(t *testing.T) {
	quietKlog()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	utilruntime.HandleError(errors.New("next reader: use of closed network connection"))
	klog.Error("an error through klog")
	klog.ErrorS(errors.New("x"), "a structured error through klog")
	klog.Flush()
	os.Stderr = saved
	_ = w.Close()
	out, _ := io.ReadAll(r)
	if len(out) != 0 {
		t.Errorf("client-go's log reached stderr:\n%s", out)
	}
}
