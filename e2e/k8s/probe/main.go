// Command probe is the static program in the test cluster's own images (e2e/k8s/cluster.sh):
// the node's pod sandbox ("pause") and the network probe its self-check runs. It also writes
// those images, so the cluster needs no registry and no Docker to get them.
//
//	probe pause                      wait for a signal (the pod sandbox)
//	probe listen ADDR                accept TCP connections on ADDR, answer "ok", until killed
//	probe dial ADDR                  exit 0 when a TCP connection to ADDR opens within 3 s, else 1
//	probe image OUT NAME ARG...      write an OCI image archive: this binary as /probe, FROM
//	                                 scratch, entrypoint /probe, command ARG... (a pod's args
//	                                 replace them), named NAME (for ctr import)
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		pause()
	}
	var err error
	switch os.Args[1] {
	case "pause":
		pause()
	case "listen":
		err = listen(arg(2))
	case "dial":
		err = dial(arg(2))
	case "image":
		if len(os.Args) < 5 {
			usage()
		}
		err = image(os.Args[2], os.Args[3], os.Args[4:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: probe pause | listen ADDR | dial ADDR | image OUT NAME ARG...")
	os.Exit(2)
}

func arg(i int) string {
	if len(os.Args) <= i {
		usage()
	}
	return os.Args[i]
}

// pause is a pod sandbox's whole job: hold the namespaces until told to stop. As PID 1 it
// also reaps nothing (the sandbox has no children).
func pause() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
	<-c
	os.Exit(0)
}

func listen(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "probe: listening on", l.Addr())
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		_, _ = c.Write([]byte("ok\n"))
		_ = c.Close()
	}
}

func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		fmt.Printf("%s unreachable: %v\n", addr, err)
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	_ = c.Close()
	fmt.Printf("%s reachable\n", addr)
	return nil
}

// image writes an OCI image layout archive holding one layer with this executable as /probe.
// Uncompressed layers keep it simple: the layer's digest is also its diff ID.
func image(out, name string, args []string) error {
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		return err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: "probe", Mode: 0o755, Size: int64(len(self)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(self); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	type desc struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int               `json:"size"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	blobs := map[string][]byte{}
	put := func(mt string, b []byte) desc {
		sum := sha256.Sum256(b)
		d := "sha256:" + hex.EncodeToString(sum[:])
		blobs[hex.EncodeToString(sum[:])] = b
		return desc{MediaType: mt, Digest: d, Size: len(b)}
	}
	layerDesc := put("application/vnd.oci.image.layer.v1.tar", layer.Bytes())
	cfg, _ := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": []string{"/probe"}, "Cmd": args},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layerDesc.Digest}},
	})
	cfgDesc := put("application/vnd.oci.image.config.v1+json", cfg)
	man, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        cfgDesc,
		"layers":        []desc{layerDesc},
	})
	manDesc := put("application/vnd.oci.image.manifest.v1+json", man)
	manDesc.Annotations = map[string]string{"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name}
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []desc{manDesc}})

	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	aw := tar.NewWriter(f)
	file := func(name string, b []byte) error {
		if err := aw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := aw.Write(b)
		return err
	}
	if err := file("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := file("index.json", index); err != nil {
		return err
	}
	for h, b := range blobs {
		if err := file("blobs/sha256/"+h, b); err != nil {
			return err
		}
	}
	if err := aw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
