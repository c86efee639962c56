# Shared settings for the Soft-RoCE guest scripts (sourced, not run).
# Everything heavy (qemu prefix, guest image) lives in a machine-wide cache
# OUTSIDE the clone, so that a second run on the same machine reuses it.

GUEST_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$GUEST_DIR/../.." && pwd)"
CACHE_ROOT="${UDAH_GUEST_CACHE:-/var/cache/udah-guest}"

# Debian release of both the host and the guest (the host-built binaries must
# run in the guest, so the two must match).
SUITE=bookworm

log() { echo "[guest $(date -u +%H:%M:%S)] $*" >&2; }
die() { echo "[guest] ERROR: $*" >&2; exit 1; }

# The mirror apt already uses (first deb.debian.org-style URI of the main
# archive in the deb822 or one-line sources), so debootstrap and apt agree.
apt_mirror() {
  local m
  m=$(grep -rhsE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
      | grep -v security | grep -oE 'https?://[^ ]+/debian/?' | head -n1 || true)
  echo "${m:-http://deb.debian.org/debian}"
}

# Key of the cached image: a hash of the files that define it. Changing the
# recipe builds a new image beside the old one.
image_key() {
  cat "$GUEST_DIR/image.sh" | sha256sum | cut -c1-16
}
