//go:build !unix

package toolbox

import "os"

// checkWritable: no access(2) here; the owner write bit stands in for it
// (the agent itself runs in Linux containers).
func checkWritable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.Mode().Perm()&0o200 == 0 {
		return os.ErrPermission
	}
	return nil
}

// ownerNote: no uids here.
func ownerNote(string) string { return "" }
