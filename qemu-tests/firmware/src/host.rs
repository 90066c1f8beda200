//! A file on the host through semihosting (QEMU's `-semihosting-config target=native`
//! opens it relative to QEMU's working directory): how the RAM file leaves the device.

use cortex_m_semihosting::{nr, syscall};

/// Creates (or truncates) `name` (NUL-terminated) on the host and writes `bytes` to it.
pub fn write_file(name: &str, bytes: &[u8]) -> Result<(), ()> {
    let path = name.as_bytes();
    if path.last() != Some(&0) {
        return Err(());
    }
    // SAFETY: SYS_OPEN, SYS_WRITE and SYS_CLOSE with pointers and lengths of live buffers,
    // as the Arm semihosting specification defines them.
    unsafe {
        let fd = syscall!(OPEN, path.as_ptr(), nr::open::W_TRUNC_BINARY, path.len() - 1) as isize;
        if fd < 0 {
            return Err(());
        }
        // SYS_WRITE returns the bytes it did not write.
        let left = syscall!(WRITE, fd as usize, bytes.as_ptr(), bytes.len());
        let closed = syscall!(CLOSE, fd as usize);
        if left != 0 || closed != 0 {
            return Err(());
        }
    }
    Ok(())
}
