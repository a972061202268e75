// Package pmlenv lists the PML_* environment variables pml reads besides
// the .pml.json overrides (those are config.Keys' Env): their meaning,
// default and an example. docs/configuration.md is made from this list,
// and a test reads pml's source for every "PML_…" name so that a
// variable added without its row here fails `make test`.
package pmlenv

// Variable is one environment variable of pml.
type Variable struct {
	Name string
	// Default is what applies without the variable, in words.
	Default string
	// Meaning says what it does (Markdown).
	Meaning string
	// Example is a value it accepts.
	Example string
	// Internal: set by pml's own tests or by pml for its containers;
	// the reference lists it so nobody wonders, and says not to set it.
	Internal bool
}

// Variables are pml's own variables, by name.
var Variables = []Variable{
	{Name: "PML_WORKSPACE", Default: "for `pml stdio`, the client's first MCP root that is a local directory and not `/`, the home or a system directory, walked up to the nearest directory with `.git`, `go.mod`, `package.json`, `deno.json` or `.pml.json`; otherwise the same walk from the current directory, else the current directory itself (with a warning)",
		Meaning: "The project directory pml serves and mounts into tool containers. Set, it wins over the client's MCP roots. `/`, your home, a directory holding it and system directories (`/etc`, `/usr`, `/var`, …) are refused. pml also sets it inside its own tool containers.",
		Example: "/home/me/src/project"},
	{Name: "PML_API_KEY", Default: "the key in the user's credentials file (`~/.config/pml/credentials`, written by `pml init --api-key`), else none: cloud tools are off",
		Meaning: "The PML cloud API key; it wins over the credentials file. Without a key pml never contacts the cloud.",
		Example: "KEY"},
	{Name: "PML_LOG_LEVEL", Default: "`info`",
		Meaning: "Log level on stderr: `debug`, `info`, `warn` or `error` (the `--log-level` flag wins). An invalid value falls back to `info`.",
		Example: "debug"},
	{Name: "PML_LOG_FORMAT", Default: "`auto` (text on a terminal, else JSON lines)",
		Meaning: "Log format on stderr: `auto`, `text` (or `console`) or `json` (the `--log-format` flag wins). With JSON lines, everything on stderr is a JSON event, each said once: a command's own lines (init's steps, a pull's progress, a question), and a failed command's error, last, at level error with its `exit_code`.",
		Example: "json"},
	{Name: "PML_SERVE_TOKEN", Default: "a random token, printed on stderr at start",
		Meaning: "The bearer token every request to `pml serve` must carry.",
		Example: "a-long-random-string"},
	{Name: "PML_RELEASES_URL", Default: "pml's GitHub releases",
		Meaning: "Where `pml upgrade` finds releases (https, or http to a loopback address): a mirror.",
		Example: "https://mirror.example/pml/releases"},
	{Name: "PML_VERIFY_SIGNATURE", Default: "verify when `cosign` is installed",
		Meaning: "`0`: `pml upgrade` (and `install.sh`) do not verify the cosign signature of the release's checksums file even when `cosign` is installed (for a mirror of an unsigned build); the archive's checksum is always verified.",
		Example: "0"},
	{Name: "PML_CACHE_DIR", Default: "`pml` in the user's cache directory (`~/.cache/pml` on Linux, `~/Library/Caches/pml` on macOS)",
		Meaning: "Where pml extracts its in-container program (under `inside/`) and keeps what it proved of each container engine (`engine-proofs.json`). An engine in a VM must see it: put it under a directory the VM shares.",
		Example: "/var/cache/pml"},
	{Name: "PML_IMAGES_MANIFEST", Default: "the manifest built into pml",
		Meaning: "A manifest file that replaces the built-in list of pml's images (`pml images`, `pml doctor`); the `--manifest` flag wins.",
		Example: "/etc/pml/images.yaml"},
	{Name: "PML_TOOLBOX_REPO", Default: "pml/toolbox",
		Meaning: "The image repository pml's toolbox image is tagged in (the tag stays the digest of the in-container program): a registry of your own that a cluster's nodes pull from, or a name of its own on a shared engine. A tag, a digest or a malformed name is an error.",
		Example: "registry.example.com/pml/toolbox"},
	{Name: "PML_KUBERNETES_NODE", Default: "the node whose name or address is this host's",
		Meaning: "With `runtime: kubernetes` on a node of the cluster: the node pml runs on, when its name is not the host's name. pml never guesses a node elsewhere.",
		Example: "worker-1"},
	{Name: "PML_KUBERNETES_POD_DEADLINE", Default: "1 hour, or twice the call timeout",
		Meaning: "With `runtime: kubernetes`: the longest life of a pod (`activeDeadlineSeconds`), so a pod ends even when pml was killed.",
		Example: "30m"},
	{Name: "PML_RUNTIME_CLASS", Default: "from `sandbox.runtime`",
		Meaning: "With `runtime: kubernetes`: the RuntimeClass every pml pod runs with, above `sandbox.runtime` (a cluster's gVisor class is often not called `runsc`; GKE's is `gvisor`).",
		Example: "gvisor"},
	{Name: "PML_HOST_ID", Default: "a digest of `/etc/machine-id`, the boot id and the pid namespace",
		Meaning: "Overrides the host identity pml labels its containers with, for tests that play two hosts sharing one engine.",
		Example: "host-a", Internal: true},
}
