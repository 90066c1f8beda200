//! Puts memory.x where the linker (cortex-m-rt's link.x) finds it.
use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    std::fs::copy("memory.x", out.join("memory.x")).unwrap();
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed=memory.x");
    // The files it writes are named after the target.
    println!("cargo:rustc-env=FIRMWARE_TARGET={}", std::env::var("TARGET").unwrap());
}
