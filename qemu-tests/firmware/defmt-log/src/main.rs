//! `defmt-log ELF < FRAMES > LOG`: the firmware's defmt log, as `defmt-print -e ELF` prints
//! it without colours or locations — one line per frame, the level in capitals padded to five
//! columns, then the message (`INFO  done`).
//!
//! The test command used to build defmt-print 1.2.0 itself for this (about five minutes from
//! empty caches: its terminal, file-watching and async runtime dependencies); the decoding is
//! defmt-decoder's either way. Exits 1 on a frame the table does not describe, so a garbled
//! capture fails the proof (a frame cut short at the end is left out, as defmt-print leaves
//! it; the proof then misses the lines it checks).

use std::io::{Read, Write};
use std::process::ExitCode;

use defmt_decoder::{DecodeError, Table};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("defmt-log: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args_os().skip(1);
    let (Some(elf_path), None) = (args.next(), args.next()) else {
        return Err("usage: defmt-log ELF < FRAMES > LOG".into());
    };
    let elf = std::fs::read(&elf_path).map_err(|e| format!("{}: {e}", elf_path.to_string_lossy()))?;
    let table = Table::parse(&elf)
        .map_err(|e| format!("{}: {e}", elf_path.to_string_lossy()))?
        .ok_or_else(|| format!("{}: no .defmt section", elf_path.to_string_lossy()))?;
    let mut frames = Vec::new();
    std::io::stdin().read_to_end(&mut frames).map_err(|e| format!("standard input: {e}"))?;

    let mut decoder = table.new_stream_decoder();
    decoder.received(&frames);
    let mut out = std::io::stdout().lock();
    let mut decoded = 0usize;
    loop {
        match decoder.decode() {
            Ok(frame) => {
                let level = frame.level().map_or("", |l| l.as_str()).to_uppercase();
                writeln!(out, "{level:<5} {}", frame.display_message()).map_err(|e| format!("standard output: {e}"))?;
                decoded += 1;
            }
            // Everything received was decoded: the stream ends on a frame's end.
            Err(DecodeError::UnexpectedEof) => break,
            Err(DecodeError::Malformed) => {
                return Err(format!("frame {} is malformed (after {decoded} decoded)", decoded + 1));
            }
        }
    }
    Ok(())
}
