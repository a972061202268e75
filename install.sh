#!/bin/sh
# install.sh: installs pml from its releases.
#
#   curl -fsSL https://github.com/pml-dev/pml/releases/latest/download/install.sh | sh
#
# Detects the OS and architecture, downloads the matching archive and the
# release's checksums file, verifies the checksums file's keyless cosign
# signature by pml's release workflow when cosign is installed (and says
# that it did not when it is not), refuses an archive whose sha256 does not
# match (changing nothing), and installs pml into ~/.pml/bin. Running it
# again installs the release again (or a newer one); nothing else changes.
# When the directory is not on PATH it says how to put it there for your
# shell; with --modify-path it adds that line to your shell's startup file
# itself (once: a second run finds it there).
#
#   curl -fsSL …/install.sh | sh -s -- --modify-path
#
# Environment:
#   PML_INSTALL_DIR   where pml goes (default: $HOME/.pml/bin)
#   PML_VERSION       a release tag, e.g. v1.2.3 (default: the latest)
#   PML_RELEASES_URL  where releases are (default: pml's GitHub releases),
#                     laid out like GitHub's: <url>/latest/download/<asset>,
#                     <url>/download/<tag>/<asset>
#   PML_VERIFY_SIGNATURE=0  skips the signature check even with cosign
#                     installed (a mirror of an unsigned build); the
#                     checksum is always checked
set -eu

modify_path=0
for arg in "$@"; do
	case $arg in
	--modify-path) modify_path=1 ;;
	*)
		printf 'install.sh: unknown argument %s (the one argument is --modify-path)\n' "$arg" >&2
		exit 2
		;;
	esac
done

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

# The checksums file's signature: cosign keyless, by the release workflow of
# pml's repository for a v* tag (GitHub's OIDC identity); the same check
# pml upgrade makes (internal/release). The checksum below is always checked.
sig=checksums.txt.sigstore.json
if [ "${PML_VERIFY_SIGNATURE:-}" = 0 ]; then
	say "PML_VERIFY_SIGNATURE=0: the signature of checksums.txt is not verified, only the archive's checksum"
elif command -v cosign >/dev/null 2>&1; then
	download "$base/$sig" "$tmp/$sig" || fail "could not download $base/$sig: the release's checksums have no signature to verify; nothing was installed (PML_VERIFY_SIGNATURE=0 skips the check, for a mirror of an unsigned build)"
	cosign verify-blob --bundle "$tmp/$sig" \
		--certificate-identity-regexp '^https://github\.com/pml-dev/pml/\.github/workflows/release\.yml@refs/tags/v' \
		--certificate-oidc-issuer https://token.actions.githubusercontent.com \
		"$tmp/checksums.txt" >"$tmp/cosign.log" 2>&1 ||
		fail "$sig is not a valid signature of checksums.txt by pml's release workflow (cosign: $(tail -n 1 "$tmp/cosign.log")): the release may have been tampered with; nothing was installed"
	say "✓ checksums.txt is signed by pml's release workflow (cosign)"
else
	say "cosign is not installed: the signature of checksums.txt is not verified, only the archive's checksum (install cosign to have it verified)"
fi

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
# The startup file of the user's shell (by $SHELL) and the line that puts
# the directory on PATH there; pml doctor gives the same advice.
home=${HOME:-}
rc=$home/.profile
line="export PATH=\"$dir:\$PATH\""
case ${SHELL:-} in
*/zsh) rc=${ZDOTDIR:-$home}/.zshrc ;;
*/bash)
	# Terminals on macOS start login shells, which read .bash_profile.
	if [ "$os" = darwin ]; then rc=$home/.bash_profile; else rc=$home/.bashrc; fi
	;;
*/fish)
	rc=$home/.config/fish/config.fish
	line="fish_add_path $dir"
	;;
esac

# add_to_rc: appends the line to rc unless it is there: into a copy beside
# it, renamed over it, so that the file is never seen half-written (a
# linked rc file, as dotfile managers make, is appended to in place, to
# keep the link).
add_to_rc() {
	if [ -f "$rc" ] && grep -qxF "$line" "$rc"; then
		say "$rc already puts $dir on PATH"
		return 0
	fi
	mkdir -p "$(dirname "$rc")" || return 1
	if [ -L "$rc" ]; then
		printf '\n# pml (install.sh)\n%s\n' "$line" >>"$rc" || return 1
	else
		# cp -p: the copy keeps the rc file's permissions.
		new=$(dirname "$rc")/.$(basename "$rc").pml.$$
		if ! {
			if [ -f "$rc" ]; then cp -p "$rc" "$new"; else : >"$new"; fi &&
				printf '\n# pml (install.sh)\n%s\n' "$line" >>"$new" &&
				mv -f "$new" "$rc"
		}; then
			rm -f "$new"
			return 1
		fi
	fi
	say "✓ added to $rc: $line"
}

case ":${PATH:-}:" in
*":$dir:"*) ;;
*)
	say ""
	if [ -z "$home" ]; then
		say "$dir is not on your PATH (and HOME is not set): add it to PATH to run pml by name."
	elif [ "$modify_path" = 1 ]; then
		add_to_rc || fail "could not write $rc: add this line to it yourself: $line"
		say "Open a new terminal (or run: $line) to use pml."
	elif [ -f "$rc" ] && grep -qxF "$line" "$rc"; then
		say "$rc puts $dir on PATH: open a new terminal (or run: $line) to use pml."
	else
		say "$dir is not on your PATH. Add it for your shell, then open a new terminal:"
		say "  echo '$line' >> $rc"
		say "(or run install.sh again with --modify-path to have it added)"
	fi
	;;
esac
say ""
say "Next: in a project's directory, run"
say "  pml init"
say "(pml needs a Docker engine or Podman; pml doctor checks it.)"
