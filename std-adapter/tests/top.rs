//! `tachyon top` on a journaled stream of ten million samples as it grows: each refresh reads
//! only the bytes the stream gained, its counts are every sample written so far, and the
//! command's memory stays bounded while the file grows past what a view could hold.

use std::path::PathBuf;

use tachyon::memory::IoSink;
use tachyon::top::Follow;
use tachyon_core::capture::Taken;
use tachyon_core::storage::VecWriterStorage;
use tachyon_core::transport::{FlushPolicy, JournalWriter};
use tachyon_core::{Frame, WriterConfig};

const SAMPLES: u64 = 10_000_000;
const GROWTHS: u64 = 10;
/// Samples in a row with the same stack: the REPEAT runs a hot loop gives.
const RUN: u64 = 16;

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("tachyon-top-{name}-{}", std::process::id()))
}

#[test]
fn ten_million_samples_followed_reading_only_new_bytes_in_bounded_memory() {
    // A child's peak resident set counts the process it was forked from: this test runs in a
    // process of its own (about 14 MB here), not in one with the harness's other tests.
    if tachyon_test_kit::in_a_process_of_its_own(
        "top::ten_million_samples_followed_reading_only_new_bytes_in_bounded_memory",
    ) {
        return;
    }
    let path = temp("growing.pyb");
    let mut file = std::fs::File::create(&path).unwrap();
    let mut storage = VecWriterStorage::growing(16, 16384);
    let mut scratch = vec![0u8; 64 << 10];
    let config = WriterConfig::new(1_000_000, 100);
    let policy = FlushPolicy { every_samples: 100_000, every_us: 0 };
    let mut w = JournalWriter::new(IoSink(&mut file), &mut scratch, storage.storage(), config, policy).unwrap();
    let names: Vec<Vec<u8>> = (0..8).map(|f| format!("function_{f}").into_bytes()).collect();
    let ids: Vec<_> = names.iter().map(|n| w.intern_frame(Frame::new(b"/srv/app/engine.py", n)).unwrap()).collect();
    let mut follow = Follow::new(&path, None);
    let mut size = 0;
    for growth in 0..GROWTHS {
        for i in growth * SAMPLES / GROWTHS..(growth + 1) * SAMPLES / GROWTHS {
            // Four threads, each on stacks of 2 to 5 frames that change every RUN samples.
            let variant = (i / RUN) as usize;
            let depth = 2 + variant % 4;
            let stack: Vec<_> = (0..depth).map(|d| ids[(variant + d) % ids.len()]).collect();
            let taken = Taken { timestamp_us: 1_000_000 + i * 100, thread_id: 1 + i % 4, ..Taken::default() };
            w.write_thread_sample_ids(taken, &stack).unwrap();
        }
        w.flush().unwrap();
        let grown = std::fs::metadata(&path).unwrap().len();
        let counts = follow.refresh().unwrap();
        assert_eq!(follow.bytes_read(), grown - size, "growth {growth}: only the new bytes are read");
        assert_eq!(counts.samples(), (growth + 1) * SAMPLES / GROWTHS, "growth {growth}");
        size = grown;
    }
    eprintln!("{SAMPLES} samples: {size} bytes of stream");

    // The command on the stream as it stands (still being written), in one process of its
    // own: every sample, in memory that does not follow the file's length.
    let out = temp("top.json");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_tachyon"))
        .args(["top", "--once", "--json"])
        .arg(&path)
        .stdout(std::fs::File::create(&out).unwrap())
        .spawn()
        .unwrap();
    let (status, peak) = tachyon_test_kit::wait_with_peak_rss(child).unwrap();
    assert!(status.success(), "{status}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(json["total"], SAMPLES);
    eprintln!("tachyon top --once on {size} bytes: peak RSS {} KiB", peak >> 10);
    assert!(peak < 64 << 20, "peak RSS {} KiB", peak >> 10);
    assert!(size > 64 << 20, "the stream ({size} bytes) is not larger than the bound");
    for p in [path, out] {
        std::fs::remove_file(p).unwrap();
    }
}

/// `tachyon top`'s follower on MOJO files Austin wrote (3.7.0 and 4.0.0, the committed
/// recordings and a small vector), written out a few bytes at a time as Austin's buffered
/// writes leave them (cut inside events and strings): each refresh reads only what the file
/// gained and the event cut at the last refresh's end, and counts what counting the file
/// from nothing counts where it ends at the last whole event.
#[test]
fn top_follows_a_growing_mojo_file_reading_only_what_it_gained() {
    use std::io::Write as _;
    use tachyon::top::{Counts, SortBy};
    use tachyon_core::mojo::Reader;
    use tachyon_test_kit::fixtures;
    let root = fixtures::root();
    let files = [
        (root.join("qemu-tests/vectors/mojo-austin-3.7/a37_full_small_threads_py311.mojo"), 1),
        (root.join("qemu-tests/fixtures/recorded/austin-3.7.0/threads.mojo"), 509),
        (root.join("qemu-tests/fixtures/recorded/austin-4.0.0/a40-threads.mojo"), 701),
    ];
    for (source, most) in files {
        let name = source.file_name().unwrap().to_string_lossy().into_owned();
        let file = fixtures::read(&source);
        // Where each event starts, read by the reader of whole files.
        let mut window = vec![0u8; 1 << 16];
        let mut reader = Reader::open(tachyon_core::io::Cursor::new(&file[..]), &mut window).unwrap();
        let mut boundaries = vec![reader.offset()];
        while let Some((_, _)) = reader.next_item().unwrap() {
            boundaries.push(reader.offset());
        }
        let path = temp(&format!("growing-{name}"));
        let whole = temp(&format!("whole-{name}"));
        let mut out = std::fs::File::create(&path).unwrap();
        let mut follow = Follow::new(&path, None);
        let (mut at, mut step, mut taken, mut refreshed) = (0, 1, 0u64, 0);
        while at < file.len() {
            let next = (at + step).min(file.len());
            out.write_all(&file[at..next]).unwrap();
            at = next;
            step = step % most + 1;
            let counts = follow.refresh().unwrap_or_else(|e| panic!("{name} at {at}: {e}"));
            let end = *boundaries.iter().rev().find(|&&b| b <= at as u64).unwrap_or(&0);
            if end == 0 {
                // The header is not all written yet: nothing counted.
                assert_eq!((follow.bytes_read(), counts.samples()), (at as u64, 0), "{name} at {at}");
                continue;
            }
            // The header once (through a window it fits in), then from where the last
            // refresh stopped: the new bytes and the event that was cut.
            let header = if taken == 0 { (at as u64).min(80) } else { 0 };
            assert_eq!(follow.bytes_read(), header + at as u64 - taken.max(boundaries[0]), "{name} at {at}");
            taken = end;
            std::fs::write(&whole, &file[..end as usize]).unwrap();
            let mut afresh = Counts::new(None);
            afresh.add_path(&whole).unwrap();
            assert_eq!(counts.json(SortBy::Name), afresh.json(SortBy::Name), "{name} at {at}");
            refreshed += 1;
        }
        assert!(refreshed > 100, "{name}: {refreshed}");
        let last = follow.refresh().unwrap();
        assert_eq!(follow.bytes_read(), 0, "{name}: nothing new");
        let mut afresh = Counts::new(None);
        afresh.add_path(&source).unwrap();
        assert!(afresh.samples() > 0, "{name}");
        assert_eq!(last.json(SortBy::Name), afresh.json(SortBy::Name), "{name}");
        std::fs::remove_file(&path).unwrap();
        std::fs::remove_file(&whole).unwrap();
    }
}

/// `tachyon top`'s follower on a device's sample stream (`tachyon_core::stream`) as it grows:
/// at each refresh every sample of the frames written so far, as `tachyon receive` salvages
/// them (the follower reads such a stream whole at each change).
#[test]
fn top_follows_a_growing_sample_stream() {
    use tachyon_core::stream::{ids_words, StreamWriter};
    let path = temp("growing-samples.bin");
    let mut file = std::fs::File::create(&path).unwrap();
    let (mut buffer, mut sent) = ([0u8; 256], [0u32; ids_words(8)]);
    let config = WriterConfig::new(0, 100);
    let mut w = StreamWriter::new(IoSink(&mut file), &mut buffer, &mut sent, config).unwrap();
    let names: Vec<Vec<u8>> = (0..8).map(|f| format!("function_{f}").into_bytes()).collect();
    let mut follow = Follow::new(&path, None);
    for growth in 0..5u64 {
        for i in growth * 1_000..(growth + 1) * 1_000 {
            let ids: Vec<u32> = (0..1 + i % 4).map(|d| ((i / 7 + d) % 8) as u32).collect();
            let taken = Taken { timestamp_us: i * 100, thread_id: 1 + i % 2, ..Taken::default() };
            w.write_sample(taken, &ids, |id| Frame::new(b"fw/app.tl", &names[id as usize])).unwrap();
        }
        w.flush().unwrap();
        let counts = follow.refresh().unwrap();
        assert_eq!(counts.samples(), (growth + 1) * 1_000, "growth {growth}");
    }
    assert_eq!(w.finish().unwrap(), 5_000);
    assert_eq!(follow.refresh().unwrap().samples(), 5_000);
    std::fs::remove_file(path).unwrap();
}
