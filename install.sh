#!/bin/sh
# install.sh: installs pml from its releases.
#
#   curl -fsSL https://github.com/pml-dev/pml/releases/latest/download/install.sh | sh
#
# Detects the OS and architecture, downloads the matching archive and the
# release's checksums file, refuses an archive whose sha256 does not match
# (changing nothing), and installs pml into ~/.pml/bin. Running it again
# installs the release again (or a newer one); nothing else changes.
#
# Environment:
#   PML_INSTALL_DIR   where pml goes (default: $HOME/.pml/bin)
#   PML_VERSION       a release tag, e.g. v1.2.3 (default: the latest)
#   PML_RELEASES_URL  where releases are (default: pml's GitHub releases),
#                     laid out like GitHub's: <url>/latest/download/<asset>,
#                     <url>/download/<tag>/<asset>
set -eu

releases=${PML_RELEASES_URL:-https://github.com/pml-dev/pml/releases}
releases=${releases%/}
version=${PML_VERSION:-latest}
# The checksums come from the same place as the archive: over plain http
# anyone on the way could change both.
insecure() {
	printf 'install.sh: PML_RELEASES_URL=%s is not an https URL (or http to a loopback address); nothing was installed\n' "$releases" >&2
	exit 1
}
# Plain http only to a literal loopback host, read as curl reads the URL:
# the host ends at the first / ? or #, and anything before an @ is a user
# name (http://localhost:1@example.com/ goes to example.com), so a URL with
# one is refused, as is any port that is not digits.
loopback_http() {
	authority=${releases#http://}
	authority=${authority%%[/?#]*}
	case $authority in
	*@* | *\\*) return 1 ;;
	"[::1]" | "[::1]:"*) port=${authority#"[::1]"} ;;
	*)
		host=${authority%%:*}
		port=${authority#"$host"}
		case $host in
		localhost) ;;
		127.*[!0-9.]* | 127.) return 1 ;;
		127.*) ;;
		*) return 1 ;;
		esac
		;;
	esac
	case $port in
	"") ;;
	: | :*[!0-9]*) return 1 ;;
	:*) ;;
	*) return 1 ;;
	esac
}
case $releases in
https://*) ;;
http://*) loopback_http || insecure ;;
*) insecure ;;
esac

say() { printf '%s\n' "$*"; }
fail() {
	printf 'install.sh: %s\n' "$*" >&2
	exit 1
}

if [ -n "${PML_INSTALL_DIR:-}" ]; then
	dir=$PML_INSTALL_DIR
elif [ -n "${HOME:-}" ]; then
	dir=$HOME/.pml/bin
else
	fail "HOME is not set: set PML_INSTALL_DIR to the directory pml should go into"
fi

os=$(uname -s)
case $os in
Linux) os=linux ;;
Darwin) os=darwin ;;
MINGW* | MSYS* | CYGWIN* | Windows_NT) os=windows ;;
*) fail "pml has no release for $os (there are for Linux, macOS and Windows); build it from source: docs/install.md" ;;
esac
arch=$(uname -m)
case $arch in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) fail "pml has no release for $arch processors (there are for amd64 and arm64)" ;;
esac
if [ "$os" = windows ] && [ "$arch" != amd64 ]; then
	fail "pml has no release for windows/$arch (there is for windows/amd64)"
fi

exe=pml
asset=pml_${os}_${arch}.tar.gz
if [ "$os" = windows ]; then
	exe=pml.exe
	asset=pml_${os}_${arch}.zip
fi

if [ "$version" = latest ]; then
	base=$releases/latest/download
else
	base=$releases/download/$version
fi

# download URL FILE
if command -v curl >/dev/null 2>&1; then
	download() { curl -fsSL --proto '=https,http' --proto-redir '=https' -o "$2" "$1"; }
elif command -v wget >/dev/null 2>&1; then
	download() { wget -q -O "$2" "$1"; }
else
	fail "neither curl nor wget is installed: install one of them and run this again"
fi

# sha256 FILE: prints its hex sha256.
if command -v sha256sum >/dev/null 2>&1; then
	sha256() { sha256sum "$1" | cut -d ' ' -f 1; }
elif command -v shasum >/dev/null 2>&1; then
	sha256() { shasum -a 256 "$1" | cut -d ' ' -f 1; }
elif command -v openssl >/dev/null 2>&1; then
	sha256() { openssl dgst -sha256 -r "$1" | cut -d ' ' -f 1; }
else
	fail "no sha256 tool (sha256sum, shasum or openssl) to verify the download with"
fi

tmp=$(mktemp -d 2>/dev/null || mktemp -d -t pml-install)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

say "Downloading $asset from $base"
download "$base/$asset" "$tmp/$asset" || fail "could not download $base/$asset; nothing was installed"
download "$base/checksums.txt" "$tmp/checksums.txt" || fail "could not download $base/checksums.txt; nothing was installed"

want=$(awk -v f="$asset" '$2 == f || $2 == "*" f { print $1; exit }' "$tmp/checksums.txt")
[ -n "$want" ] || fail "checksums.txt does not list $asset; nothing was installed"
got=$(sha256 "$tmp/$asset")
if [ "$got" != "$want" ]; then
	fail "$asset does not match its checksum in checksums.txt (sha256 $got, expected $want): the download is damaged or was tampered with; nothing was installed"
fi

mkdir "$tmp/x"
if [ "$os" = windows ]; then
	command -v unzip >/dev/null 2>&1 || fail "unzip is not installed: install it and run this again"
	unzip -q "$tmp/$asset" "$exe" -d "$tmp/x" || fail "could not unpack $asset; nothing was installed"
else
	tar -xzf "$tmp/$asset" -C "$tmp/x" "$exe" || fail "could not unpack $asset; nothing was installed"
fi
[ -f "$tmp/x/$exe" ] || fail "$asset holds no $exe; nothing was installed"
chmod 755 "$tmp/x/$exe"
# pml version: "pml v1.2.3 (commit) go1.26 linux/amd64"; it also proves the
# binary runs here before it replaces anything.
line=$("$tmp/x/$exe" version) || fail "the downloaded pml does not run on this machine; nothing was installed"
installed=$(printf '%s\n' "$line" | awk '{ print $2 }')

mkdir -p "$dir" || fail "could not create $dir (set PML_INSTALL_DIR to a directory you can write)"
# Copied beside the target and renamed over it: a pml running from there
# keeps its file, and no one sees a half-written pml.
cp "$tmp/x/$exe" "$dir/.$exe.new.$$" || fail "could not write into $dir (set PML_INSTALL_DIR to a directory you can write)"
mv -f "$dir/.$exe.new.$$" "$dir/$exe" || {
	rm -f "$dir/.$exe.new.$$"
	fail "could not replace $dir/$exe"
}

say "✓ pml $installed installed: $dir/$exe"
case ":${PATH:-}:" in
*":$dir:"*) ;;
*)
	say ""
	say "$dir is not on your PATH. Add it, then open a new terminal:"
	say "  echo 'export PATH=\"$dir:\$PATH\"' >> ~/.profile"
	;;
esac
say ""
say "Next: in a project's directory, run"
say "  pml init"
say "(pml needs a Docker engine or Podman; pml doctor checks it.)"
