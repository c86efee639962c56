#!/usr/bin/env bash
# Provides qemu-system-x86_64 in a private prefix, WITHOUT `apt-get install
# qemu-system-x86`: on these machines that would remove the backported
# qemu-utils 10.x. Instead the bookworm .debs are downloaded and unpacked with
# dpkg-deb -x into $CACHE_ROOT/qemu-<version>; only their shared-library
# dependencies (which conflict with nothing) are installed with apt.
# Prints the prefix on stdout; run the binary through the wrapper
# <prefix>/run-qemu (it sets the module dir and the firmware dirs).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export DEBIAN_FRONTEND=noninteractive

# The candidate version (the one `apt-get download` fetches) keys the prefix.
ver=$(apt-cache policy qemu-system-x86 | awk '/Candidate:/ {print $2}')
if [[ -z "$ver" || "$ver" == "(none)" ]]; then
  log "apt knows no qemu-system-x86; running apt-get update"
  apt-get update -qq -o DPkg::Lock::Timeout=600
  ver=$(apt-cache policy qemu-system-x86 | awk '/Candidate:/ {print $2}')
fi
[[ -n "$ver" && "$ver" != "(none)" ]] || die "no qemu-system-x86 candidate in apt's sources"
prefix="$CACHE_ROOT/qemu-${ver//[:+~]/_}"
mkdir -p "$CACHE_ROOT"

exec 8>"$prefix.lock"
flock 8
if [[ ! -f "$prefix/DONE" ]]; then
  log "unpacking qemu-system-x86 $ver into $prefix"
  rm -rf "$prefix" "$prefix.debs"
  mkdir -p "$prefix.debs"
  # The emulator, its modules (accel-tcg-*.so is in -common), the BIOS and
  # option ROMs (seabios, ipxe-qemu, qemu-system-data: the -L directories).
  ( cd "$prefix.debs" && apt-get download -q qemu-system-x86 qemu-system-common \
      qemu-system-data seabios ipxe-qemu 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 ) \
    || die "apt-get download of qemu-system-x86 failed"
  for deb in "$prefix.debs"/*.deb; do dpkg-deb -x "$deb" "$prefix"; done
  # Shared-library dependencies of the emulator itself (not the GUI/audio
  # modules of -common, which the guest never loads).
  libs=$(dpkg-deb -f "$prefix.debs"/qemu-system-x86_*.deb Depends | tr ',' '\n' \
         | sed -E 's/\(.*\)//; s/\|.*//; s/ //g' | grep -E '^lib' || true)
  # shellcheck disable=SC2086
  apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends $libs >/dev/null \
    || die "installing qemu's libraries failed: $libs"
  rm -rf "$prefix.debs"
  missing=$(ldd "$prefix/usr/bin/qemu-system-x86_64" | grep 'not found' || true)
  [[ -z "$missing" ]] || die "qemu-system-x86_64 misses libraries: $missing"
  cat >"$prefix/run-qemu" <<WRAP
#!/bin/sh
# qemu-system-x86_64 from the private prefix: its modules (accel-tcg) and its
# firmware (seabios, option ROMs) are looked up there, not under /usr.
export QEMU_MODULE_DIR="$prefix/usr/lib/x86_64-linux-gnu/qemu"
exec "$prefix/usr/bin/qemu-system-x86_64" -L "$prefix/usr/share/qemu" -L "$prefix/usr/share/seabios" \\
  -L "$prefix/usr/lib/ipxe/qemu" "\$@"
WRAP
  chmod 755 "$prefix/run-qemu"
  "$prefix/run-qemu" --version | head -n1 >&2 || die "the unpacked qemu does not start"
  touch "$prefix/DONE"
fi
echo "$prefix"
