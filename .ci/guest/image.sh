#!/usr/bin/env bash
# Builds (once per machine) and caches the Soft-RoCE guest image:
#   $CACHE_ROOT/image-<key>/{vmlinuz,initrd.img,rootfs.ext4,DONE}
# where <key> hashes this file (the recipe). Safe to run concurrently: the
# second caller waits on the lock and then finds the finished image.
# Prints the image directory on stdout.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# What the guest needs: a kernel + initramfs that can mount a virtio-blk root,
# the RDMA userspace (rdma-core's rxe provider, the rdma tool from iproute2,
# ibv_devinfo/ibv_ud_pingpong, udaddy), and tcpdump for post-mortems.
PACKAGES=linux-image-amd64,initramfs-tools,kmod,udev,iproute2,rdma-core,ibverbs-providers,ibverbs-utils,rdmacm-utils,tcpdump

key=$(image_key)
out="$CACHE_ROOT/image-$key"
mkdir -p "$CACHE_ROOT"

exec 9>"$CACHE_ROOT/image-$key.lock"
if ! flock -n 9; then
  log "another run is building image-$key; waiting for it"
  flock 9
fi
if [[ -f "$out/DONE" ]]; then
  log "cached image: $out"
  echo "$out"
  exit 0
fi

command -v debootstrap >/dev/null || { apt-get install -y -qq -o DPkg::Lock::Timeout=600 debootstrap >/dev/null; }
command -v mkfs.ext4 >/dev/null || { apt-get install -y -qq -o DPkg::Lock::Timeout=600 e2fsprogs >/dev/null; }

t0=$(date +%s)
work="$CACHE_ROOT/build-$key.$$"
rm -rf "$CACHE_ROOT"/build-"$key".* "$out"
mkdir -p "$work"
root="$work/root"
mirror=$(apt_mirror)
log "debootstrap $SUITE from $mirror into $root (takes 5-17 min)"
# Two attempts: a mirror hiccup should not fail a CI run.
for attempt in 1 2; do
  if debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$mirror" \
       >"$work/debootstrap.log" 2>&1; then
    break
  fi
  tail -n 40 "$work/debootstrap.log" >&2
  [[ $attempt -eq 2 ]] && die "debootstrap failed twice (log: $work/debootstrap.log)"
  log "debootstrap failed; retrying once"
  rm -rf "$root"
done

# The guest's PID 1: mounts the 9p share and hands over to the suite's init
# script that lives on the share (so changing the suite does not rebuild the
# image). The initramfs has already mounted /proc, /sys and /dev for us.
cat >"$root/sbin/udah-init" <<'INIT'
#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mountpoint -q /proc || mount -t proc proc /proc
mountpoint -q /sys || mount -t sysfs sysfs /sys
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev
modprobe -q 9pnet_virtio; modprobe -q 9p
mkdir -p /mnt/udah
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 udah /mnt/udah \
   && [ -f /mnt/udah/guest/guest-init.sh ]; then
  exec /bin/bash /mnt/udah/guest/guest-init.sh
fi
echo "udah-init: cannot mount the 9p share 'udah' or find guest/guest-init.sh" >/dev/console
echo o >/proc/sysrq-trigger
sleep 60
INIT
chmod 755 "$root/sbin/udah-init"
echo udah-guest >"$root/etc/hostname"

# Kernel and initramfs are booted directly by qemu (-kernel/-initrd).
mkdir -p "$work/img"
cp "$(ls "$root"/boot/vmlinuz-* | sort -V | tail -n1)" "$work/img/vmlinuz"
cp "$(ls "$root"/boot/initrd.img-* | sort -V | tail -n1)" "$work/img/initrd.img"
# Trim what the guest never needs, then make an ext4 image straight from the
# tree (no loop mount); qemu opens it with snapshot=on, so it stays pristine.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/usr/share/doc/* "$root"/usr/share/man/* \
       "$root"/usr/share/locale/* "$root"/boot/*
size_mb=$(( $(du -sm "$root" | cut -f1) + 400 ))
# (mkfs prints "Creating regular file" on stdout, which is the image path.)
mkfs.ext4 -q -L udahroot -d "$root" "$work/img/rootfs.ext4" "${size_mb}M" >&2
rm -rf "$root"
mv "$work/img" "$out"
mv "$work/debootstrap.log" "$out/"
rmdir "$work"
echo "$(( $(date +%s) - t0 ))" >"$out/build-seconds"
touch "$out/DONE"
# Keep the two newest images (an older checkout may still want the previous
# one); each is ~650 MB.
ls -1dt "$CACHE_ROOT"/image-*/ 2>/dev/null | tail -n +3 | while read -r old; do
  log "removing old image $old"
  rm -rf "$old" "${old%/}.lock"
done
log "image built in $(( $(date +%s) - t0 ))s: $out ($(du -sh "$out" | cut -f1))"
echo "$out"
