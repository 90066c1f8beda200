//! `tachyon`: the command (the library's [`tachyon::cli`]).

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(tachyon::cli::run(std::env::args_os()))
}
