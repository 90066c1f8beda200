//! Native addresses named by module: the modules of this process, resolving an address of
//! this test's own code.

use std::ptr::null_mut;

use tachyon_c::*;

use crate::common::*;

#[test]
fn modules_refuse_no_handle() {
    let mut frame = c_frame(c"", c"", -1);
    // SAFETY (each call below): NULL, as the header allows.
    assert_eq!(unsafe { tachyon_modules_open(null_mut()) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_modules_resolve(null_mut(), 0, 0, &mut frame) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_modules_close(null_mut()) }, TACHYON_E_NULL);
    // A writer's handle is not modules.
    let placed = Placed::new(&options());
    assert_eq!(unsafe { tachyon_modules_resolve(placed.writer.cast(), 0, 0, &mut frame) }, TACHYON_E_BAD_HANDLE);
}

#[test]
#[cfg_attr(miri, ignore = "reads /proc/self/maps and the ELF files of the process: the interpreter's own under Miri")]
fn an_address_of_this_program_is_named_by_its_module() {
    let mut modules = null_mut();
    // SAFETY (each call below): valid pointers; the modules live until closed.
    ok(unsafe { tachyon_modules_open(&mut modules) });
    let mut frame = c_frame(c"", c"", -1);
    let here = an_address_of_this_program as *const () as usize as u64;
    ok(unsafe { tachyon_modules_resolve(modules.cast(), here, 4, &mut frame) });
    // SAFETY: the names live in `modules` until its next call.
    let (file, function) = unsafe {
        (
            std::slice::from_raw_parts(frame.filename.cast::<u8>(), frame.filename_len),
            std::slice::from_raw_parts(frame.funcname.cast::<u8>(), frame.funcname_len),
        )
    };
    let (file, function) = (String::from_utf8_lossy(file), String::from_utf8_lossy(function));
    let program = std::env::current_exe().unwrap();
    let name = program.file_name().unwrap().to_string_lossy().into_owned();
    assert!(file.contains(&name), "{file} is not {name}");
    assert!(function.contains("+0x"), "{function}");
    assert_eq!(unsafe { tachyon_modules_resolve(modules.cast(), here, 4, null_mut()) }, TACHYON_E_NULL);
    ok(unsafe { tachyon_modules_close(modules) });
    assert_eq!(unsafe { tachyon_modules_close(modules) }, TACHYON_E_CLOSED);
    assert_eq!(unsafe { tachyon_modules_resolve(modules.cast(), here, 4, &mut frame) }, TACHYON_E_CLOSED);
}

/// A function of this program, whose address the test resolves.
#[inline(never)]
fn an_address_of_this_program() -> u32 {
    std::hint::black_box(7)
}
