//! `tachyon receive`: a profile streamed through the core's framed transport (as a device
//! sends it over a UART) comes back as the file the same writer makes in RAM; a capture
//! with a frame damaged or lost is refused by name and leaves no file.

use std::convert::Infallible;
use std::path::Path;

use assert_cmd::Command;
use tachyon::memory::VecSink;
use tachyon_core::storage::{VecWriterStorage, WriterCapacity};
use tachyon_core::transport::FramedSink;
use tachyon_core::{Frame, Location, Writer, WriterConfig};

/// A link that keeps what is sent.
#[derive(Default)]
struct Capture(Vec<u8>);

impl embedded_io::ErrorType for Capture {
    type Error = Infallible;
}

impl embedded_io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Infallible> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> Result<(), Infallible> {
        Ok(())
    }
}

fn storage() -> VecWriterStorage {
    VecWriterStorage::new(WriterCapacity {
        string_bytes: 1 << 12,
        strings: 64,
        frames: 64,
        threads: 8,
        rle_budget: 16384,
    })
    .unwrap()
}

fn samples<W: embedded_io::Write + embedded_io::Seek>(w: &mut Writer<'_, W>) {
    let at = |line| Location { lineno: line, end_lineno: line, col: 0, end_col: 4 };
    let main = Frame::new(b"fw/main.lua", b"main").at(at(3));
    let fib = Frame::new(b"fw/main.lua", b"fib").at(at(9));
    for i in 0..300u64 {
        let depth = 1 + (i % 5) as usize;
        let stack: Vec<Frame<'_>> = std::iter::repeat(fib).take(depth - 1).chain([main]).collect();
        w.write_thread_sample(1_000 + i * 100, 0, 1 + i % 2, 0, stack).unwrap();
    }
}

fn ram_and_capture() -> (Vec<u8>, Vec<u8>) {
    let mut s = storage();
    let mut w = Writer::new(VecSink::default(), s.storage(), WriterConfig::new(1_000, 100)).unwrap();
    samples(&mut w);
    w.finish().unwrap();
    let ram = w.into_inner().into_inner();
    let mut scratch = vec![0u8; 128];
    let mut s = storage();
    let sink = FramedSink::new(Capture::default(), &mut scratch).unwrap();
    let mut w = Writer::new(sink, s.storage(), WriterConfig::new(1_000, 100)).unwrap();
    samples(&mut w);
    w.finish().unwrap();
    let mut sink = w.into_inner();
    sink.finish().unwrap();
    (ram, sink.into_inner().0)
}

#[test]
fn a_capture_becomes_the_ram_file_and_a_damaged_one_none() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("receive");
    std::fs::create_dir_all(&dir).unwrap();
    let (ram, capture) = ram_and_capture();
    let good = dir.join("uart.bin");
    std::fs::write(&good, &capture).unwrap();
    let out = dir.join("uart.pyb");
    let _ = std::fs::remove_file(&out);
    Command::cargo_bin("tachyon").unwrap().arg("receive").arg(&good).arg("-o").arg(&out).assert().success();
    assert!(std::fs::read(&out).unwrap() == ram);
    Command::cargo_bin("tachyon").unwrap().arg("verify").arg(&out).assert().success();

    // A bit flipped in the middle; a frame's bytes cut out; the end cut off.
    let ends: Vec<usize> = capture.iter().enumerate().filter(|(_, &b)| b == 0).map(|(i, _)| i).collect();
    let mut flipped = capture.clone();
    let middle = ends[ends.len() / 2] - 3;
    flipped[middle] ^= 0x04;
    let mut lost = capture[..ends[4] + 1].to_vec();
    lost.extend_from_slice(&capture[ends[5] + 1..]);
    let cut = capture[..ends[ends.len() - 2] + 1].to_vec();
    for (name, bytes, says) in [
        ("flipped", flipped, "damaged frame"),
        ("lost", lost, "frames 5 to 5 are missing"),
        ("cut", cut, "before the stream's End"),
    ] {
        let input = dir.join(format!("{name}.bin"));
        std::fs::write(&input, bytes).unwrap();
        let out = dir.join(format!("{name}.pyb"));
        let _ = std::fs::remove_file(&out);
        let run =
            Command::cargo_bin("tachyon").unwrap().arg("receive").arg(&input).arg("-o").arg(&out).assert().code(1);
        let stderr = String::from_utf8_lossy(&run.get_output().stderr).into_owned();
        assert!(stderr.contains(says), "{name}: {stderr}");
        assert!(!out.exists(), "{name}: a file was written");
    }
}
