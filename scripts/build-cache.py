#!/usr/bin/env python3
"""cargo's build folders kept between test runs of clean checkouts at the same path.

    python3 scripts/build-cache.py attach ROOT
    python3 scripts/build-cache.py is-build-folder PATH   (exit 0 if cargo's, else 1)
    python3 scripts/build-cache.py --self-test

A clean clone has no target/ and every file's mtime is the clone's time, so cargo rebuilds
everything, links included, which the compiler cache cannot hold. `attach` links ROOT's
build folders (FOLDERS) to folders under ~/.cache/tachyon-builds/KEY (TACHYON_BUILD_CACHE
sets the parent; KEY is a hash of ROOT's absolute path), and sets each tracked file whose
bytes are what they were at the last attach back to the mtime it had then. cargo's
fingerprints then find fresh what was built from the same bytes and rebuild the rest.

Why it is safe:
- The stamps (path -> sha256 of the bytes, mtime) are written here, before any build of
  this run, so a build in this folder never postdates stamps that describe other bytes: a
  file whose bytes differ from its stamp keeps the clone's mtime, newer than every build.
- The key is the path: cargo does not rebuild a crate when its folder moves, so a binary
  built at another path would keep `env!("CARGO_MANIFEST_DIR")` pointing there.
- Only a clean checkout is attached (git status shows no change to a tracked file), and
  only when ROOT has no build folder of its own (a developer's tree keeps its own).
- Everything in the cached folders but cargo's own build folders (those with a
  `.fingerprint` at most three levels down) is removed at attach: no log, output or
  scratch file of an earlier run can stand in for this run's.
- One key is kept: attaching removes the other paths' builds (disk).

Prints one line saying what it did; exits 0 also when it attaches nothing.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

FOLDERS = ["target", "qemu-tests/firmware/target"]


def say(msg):
    print(f"build cache: {msg}")


def is_build_folder(path):
    """cargo's: a folder with a .fingerprint at most three levels down (a profile, a target
    triple's profile, a --target-dir's triple's profile)."""
    if not os.path.isdir(path) or os.path.islink(path):
        return False
    level = [path]
    for _ in range(3):
        if any(os.path.isdir(os.path.join(p, ".fingerprint")) for p in level):
            return True
        level = [os.path.join(p, c) for p in level for c in os.listdir(p)
                 if os.path.isdir(os.path.join(p, c)) and not os.path.islink(os.path.join(p, c))]
    return False


def tracked_files(root):
    out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True, capture_output=True).stdout
    return [p for p in out.decode().split("\0") if p]


def attach(root):
    root = os.path.realpath(root)
    if os.environ.get("TACHYON_NO_BUILD_CACHE"):
        return say("not used (TACHYON_NO_BUILD_CACHE is set)")
    present = [f for f in FOLDERS if os.path.lexists(os.path.join(root, f))]
    if present:
        return say(f"not used: {present[0]}/ is this tree's own")
    status = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, text=True)
    if status.returncode != 0 or status.stdout.strip():
        return say("not used: not a clean checkout")
    parent = os.environ.get("TACHYON_BUILD_CACHE") or os.path.expanduser("~/.cache/tachyon-builds")
    key = hashlib.sha256(root.encode()).hexdigest()[:16]
    home = os.path.join(parent, key)
    os.makedirs(home, exist_ok=True)
    for other in os.listdir(parent):
        if other != key:
            shutil.rmtree(os.path.join(parent, other), ignore_errors=True)
    kept = 0
    for folder in FOLDERS:
        cached = os.path.join(home, folder.replace("/", "+"))
        os.makedirs(cached, exist_ok=True)
        for entry in os.listdir(cached):
            path = os.path.join(cached, entry)
            if is_build_folder(path):
                kept += 1
            elif os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
        os.makedirs(os.path.dirname(os.path.join(root, folder)), exist_ok=True)
        os.symlink(cached, os.path.join(root, folder))

    stamps_path = os.path.join(home, "stamps.json")
    try:
        with open(stamps_path) as f:
            stamps = json.load(f)
    except (OSError, ValueError):
        stamps = {}
    fresh = {}
    restored = 0
    for rel in tracked_files(root):
        path = os.path.join(root, rel)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        old = stamps.get(rel)
        if old and old[0] == digest:
            os.utime(path, ns=(old[1], old[1]), follow_symlinks=False)
            restored += 1
        fresh[rel] = [digest, os.stat(path).st_mtime_ns]
    tmp = stamps_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(fresh, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, stamps_path)
    say(f"{home}: {kept} cargo build folders kept, {restored} of {len(fresh)} files as they were")


def self_test():
    """Two clones of a scratch repository at one path, a change between them."""
    import tempfile

    def git(*args, cwd):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                       capture_output=True)

    with tempfile.TemporaryDirectory() as tmp:
        origin, clone = os.path.join(tmp, "origin"), os.path.join(tmp, "clone")
        os.environ["TACHYON_BUILD_CACHE"] = os.path.join(tmp, "cache")
        os.makedirs(os.path.join(origin, "src"))
        for name in ("same.rs", "changed.rs"):
            with open(os.path.join(origin, "src", name), "w") as f:
                f.write(name)
        git("init", "-q", cwd=origin)
        git("add", ".", cwd=origin)
        git("commit", "-qm", "one", cwd=origin)

        def fresh_clone():
            shutil.rmtree(clone, ignore_errors=True)
            git("clone", "-q", origin, clone, cwd=tmp)
            attach(clone)

        fresh_clone()
        target = os.path.join(clone, "target")
        assert os.path.islink(target), "a clean clone's target/ is linked to the cache"
        os.makedirs(os.path.join(target, "checked", ".fingerprint"))
        os.makedirs(os.path.join(target, "s390x", "checked", ".fingerprint"))
        os.makedirs(os.path.join(target, "logs"))
        open(os.path.join(target, "step-times.txt"), "w").close()
        first = {n: os.stat(os.path.join(clone, "src", n)).st_mtime_ns for n in ("same.rs", "changed.rs")}

        with open(os.path.join(origin, "src", "changed.rs"), "a") as f:
            f.write("!")
        git("commit", "-qam", "two", cwd=origin)
        time_before = time.time_ns()
        fresh_clone()
        same = os.stat(os.path.join(clone, "src", "same.rs")).st_mtime_ns
        changed = os.stat(os.path.join(clone, "src", "changed.rs")).st_mtime_ns
        assert same == first["same.rs"], "an unchanged file gets its earlier mtime back"
        assert changed >= time_before, "a changed file keeps its clone's mtime"
        assert sorted(os.listdir(target)) == ["checked", "s390x"], f"only cargo's folders stay: {os.listdir(target)}"

        with open(os.path.join(clone, "src", "same.rs"), "a") as f:
            f.write("?")
        os.remove(target)
        os.remove(os.path.join(clone, "qemu-tests", "firmware", "target"))
        attach(clone)
        assert not os.path.lexists(target), "a tree with changes is not attached"
        os.makedirs(target)
        git("checkout", "-q", "src/same.rs", cwd=clone)
        attach(clone)
        assert not os.path.islink(target), "a tree's own target/ is kept"
    print("build-cache self-test: passed")


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) == 3 and sys.argv[1] == "is-build-folder":
        sys.exit(0 if is_build_folder(sys.argv[2]) else 1)
    if len(sys.argv) != 3 or sys.argv[1] != "attach":
        sys.exit(__doc__)
    attach(sys.argv[2])


if __name__ == "__main__":
    main()
