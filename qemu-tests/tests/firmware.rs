//! What the Cortex-M firmware (`qemu-tests/firmware/`, run by `scripts/firmware.sh`, which
//! sets `TACHYON_FIRMWARE` to where it left its files) profiled, as CPython 3.15.2's reader
//! reads it: every sample the firmware says it wrote, each stack one the interpreter's
//! program can have, at the times its ticks say; the UART stream and the sample stream are
//! the RAM file.

use std::path::PathBuf;

use serde_json::Value;
use tachyon::memory::VecSink;
use tachyon_core::records::CPYTHON_RLE_BUDGET;
use tachyon_core::storage::{VecWriterStorage, WriterCapacity};
use tachyon_core::{Frame, LittleEndian, Location, Stats, Writer, WriterConfig};

fn dir() -> PathBuf {
    PathBuf::from(std::env::var_os("TACHYON_FIRMWARE").expect(
        "TACHYON_FIRMWARE is not set: run `bash scripts/test-all.sh`, or `bash scripts/firmware.sh` \
         and set it to target/firmware",
    ))
}

/// The count after `word` in the firmware's decoded defmt log (`… 10361 written …`).
fn logged(log: &str, word: &str) -> u64 {
    let line = log.lines().find(|l| l.contains(&format!(" {word}"))).unwrap_or_else(|| panic!("{word}: {log}"));
    let before = &line[..line.find(&format!(" {word}")).unwrap()];
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Whether a stack (innermost first, as `[function, line]`) is one `fw/demo.tl` can have:
/// `main` at the root, calling `fib` from line 4 or `sum_to` from line 5; `fib` calling
/// itself from line 12, at most 15 deep (`fib(15)`); each at a line of its own.
fn possible(stack: &[(String, i64)]) -> bool {
    let root_first: Vec<(&str, i64)> = stack.iter().rev().map(|(f, l)| (f.as_str(), *l)).collect();
    let Some((&(root, root_line), rest)) = root_first.split_first() else { return false };
    if root != "main" || !(2..=7).contains(&root_line) {
        return false;
    }
    match rest {
        [] => true,
        [("sum_to", line)] => root_line == 5 && (21..=25).contains(line),
        fibs => {
            root_line == 4
                && fibs.len() <= 15
                && fibs.iter().all(|&(f, _)| f == "fib")
                && fibs[..fibs.len() - 1].iter().all(|&(_, l)| l == 12)
                && matches!(fibs[fibs.len() - 1].1, 11 | 12)
        }
    }
}

#[test]
fn the_firmware_profiles_read_back_as_the_interpreter_ran() {
    let dir = dir();
    for target in ["thumbv7em-none-eabihf", "thumbv6m-none-eabi"] {
        let ram = std::fs::read(dir.join(format!("{target}.ram.pyb"))).unwrap();
        let capture = std::fs::read(dir.join(format!("{target}.uart.bin"))).unwrap();
        assert!(tachyon::tachyon::receive::reassemble(&capture).unwrap() == ram, "{target}: UART and RAM differ");
        let stream = std::fs::read(dir.join(format!("{target}.stream.bin"))).unwrap();
        assert!(tachyon::tachyon::receive::reassemble(&stream).unwrap() == ram, "{target}: stream and RAM differ");
        let log = std::fs::read_to_string(dir.join(format!("{target}.log"))).unwrap();
        let (taken, written) = (logged(&log, "taken"), logged(&log, "written"));
        assert_eq!(logged(&log, "dropped"), 0, "{target}: {log}");
        assert_eq!(logged(&log, "refused"), 0, "{target}: {log}");
        assert_eq!(taken, written, "{target}: {log}");
        assert!(written > 2000, "{target}: {written} samples");

        let dump = std::fs::read_to_string(dir.join(format!("{target}.ram.cpython.jsonl"))).unwrap();
        let mut lines = dump.lines().map(|l| serde_json::from_str::<Value>(l).unwrap());
        let info = lines.next().unwrap();
        assert_eq!(info["sample_count"], written, "{target}");
        assert_eq!(info["sample_interval_us"], 100, "{target}");
        let (mut samples, mut in_fib, mut in_sum, mut last_ts) = (0u64, 0u64, 0u64, 0u64);
        // The host's writer, given the samples CPython read, as the firmware's was (in the
        // firmware's byte order, whatever the host's: the suite also runs on s390x).
        let capacity =
            WriterCapacity { string_bytes: 256, strings: 8, frames: 32, threads: 1, rle_budget: CPYTHON_RLE_BUDGET };
        let mut storage = VecWriterStorage::new(capacity).unwrap();
        let mut host =
            Writer::with_endian(VecSink::default(), storage.storage(), WriterConfig::new(0, 100), LittleEndian)
                .unwrap();
        for s in lines {
            let ts = s["ts"].as_u64().unwrap();
            assert!(ts > last_ts && ts % 100 == 0, "{target}: timestamp {ts} after {last_ts}");
            last_ts = ts;
            let stack: Vec<(String, i64)> = s["frames"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    assert_eq!(f[0], "fw/demo.tl", "{target}: {f}");
                    (f[1].as_str().unwrap().to_owned(), f[2][0].as_i64().unwrap())
                })
                .collect();
            assert!(possible(&stack), "{target}: impossible stack {stack:?}");
            let frames: Vec<Frame<'_>> = s["frames"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    let n = |i: usize| i32::try_from(f[2][i].as_i64().unwrap()).unwrap();
                    let at = Location { lineno: n(0), end_lineno: n(1), col: n(2), end_col: n(3) };
                    Frame::new(f[0].as_str().unwrap().as_bytes(), f[1].as_str().unwrap().as_bytes()).at(at)
                })
                .collect();
            host.write_thread_sample(ts, 0, 1, 0, frames.iter().copied()).unwrap();
            in_fib += u64::from(stack.iter().any(|(f, _)| f == "fib"));
            in_sum += u64::from(stack.iter().any(|(f, _)| f == "sum_to"));
            samples += 1;
        }
        assert_eq!(samples, written, "{target}");
        // The stats the firmware gives all three files (a capture drain's: nothing dropped or
        // refused, asserted above).
        host.set_stats(Stats::of_counts(0, Some(last_ts), written, 0, 0)).unwrap();
        host.finish().unwrap();
        assert!(host.into_inner().into_inner() == ram, "{target}: the host's writer makes other bytes");
        // The real capture, damaged: refused, or (the values of every frame unchanged) the
        // same file.
        let step = capture.len() / 41;
        for at in (0..capture.len()).step_by(step.max(1)) {
            let mut cut = capture.clone();
            cut.drain(at..(at + 5).min(capture.len()));
            let mut flipped = capture.clone();
            flipped[at] ^= 0x20;
            for damaged in [cut, flipped] {
                if let Ok(file) = tachyon::tachyon::receive::reassemble(&damaged) {
                    assert!(file == ram, "{target}: damage at {at} gave another file");
                }
            }
        }
        // Both callees run long enough to be sampled many times.
        assert!(in_fib > samples / 4 && in_sum > samples / 10, "{target}: fib {in_fib}, sum_to {in_sum} of {samples}");
    }
}

#[test]
fn impossible_stacks_are_told_apart() {
    let s = |frames: &[(&str, i64)]| frames.iter().map(|(f, l)| (f.to_string(), *l)).collect::<Vec<_>>();
    assert!(possible(&s(&[("fib", 11), ("fib", 12), ("main", 4)])));
    assert!(possible(&s(&[("sum_to", 23), ("main", 5)])));
    assert!(!possible(&s(&[("sum_to", 23), ("main", 4)])));
    assert!(!possible(&s(&[("fib", 12), ("fib", 11), ("main", 4)])));
    assert!(!possible(&s(&[("fib", 11)])));
    assert!(!possible(&s(&[])));
}
