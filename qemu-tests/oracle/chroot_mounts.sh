# Sourced by the scripts that run CPython 3.15.2's sampler in a chroot of the oracle's root
# (the sampler reads the child's memory through /proc): `oracle_chroot ROOT` bind-mounts
# /proc and /dev into ROOT, makes ROOT/work, and unmounts both when the script exits.
oracle_chroot() {
  local root=$1
  mkdir -p "$root/proc" "$root/dev" "$root/work"
  # shellcheck disable=SC2064
  trap "mountpoint -q '$root/proc' && umount '$root/proc' || true; mountpoint -q '$root/dev' && umount '$root/dev' || true" EXIT
  mountpoint -q "$root/proc" || mount --bind /proc "$root/proc"
  mountpoint -q "$root/dev" || mount --bind /dev "$root/dev"
}
