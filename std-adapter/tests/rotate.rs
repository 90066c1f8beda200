//! Rotation (`tachyon::tachyon::rotate`): a run written as period files, each complete and
//! readable on its own, named by sequence and start, holding exactly the samples written in
//! its period; frame ids interned in one period valid in every later one; a journaled
//! period killed before its end salvaged with every sample up to its last flush.

use std::path::{Path, PathBuf};

use tachyon::tachyon::receive::receive;
use tachyon::tachyon::rotate::{RotatingWriter, Rotation};
use tachyon::tachyon::source::open_path;
use tachyon_core::capture::Taken;
use tachyon_core::storage::{VecWriterStorage, WriterCapacity};
use tachyon_core::transport::FlushPolicy;
use tachyon_core::{Compression, FileKind, Frame, LittleEndian, NativeEndian, WriterConfig};

fn storage() -> VecWriterStorage {
    VecWriterStorage::new(WriterCapacity {
        string_bytes: 1 << 14,
        strings: 256,
        frames: 256,
        threads: 8,
        rle_budget: 16384,
    })
    .unwrap()
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tachyon-rotate-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A sample: thread, timestamp, function names innermost first.
type Sample = (u64, u64, Vec<Vec<u8>>);

/// A file's start time and samples.
fn read(path: &Path) -> (u64, Vec<Sample>) {
    let mut storage = None;
    let mut reader = open_path(path, &mut storage).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let start = reader.metadata().header.start_time_us;
    let mut out = vec![];
    while let Some(s) = reader.next_sample().unwrap() {
        out.push((s.thread_id, s.timestamp_us, s.frames().map(|f| f.funcname.to_vec()).collect()));
    }
    (start, out)
}

/// The files in `d`, sorted by name.
fn files(d: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

fn taken(ts: u64, thread: u64) -> Taken {
    Taken { timestamp_us: ts, interpreter_id: 0, thread_id: thread, status: 0 }
}

const START: u64 = 5_000_000;
const SECOND: u64 = 1_000_000;

/// Timestamps over 0.0–2.9 s, then a quiet stretch, then 6.2–6.9 s: by one-second periods,
/// files start at 5, 6, 7 and 11 s (the quiet seconds make no files).
fn timestamps() -> Vec<u64> {
    (0..290u64).map(|i| START + i * 10_000).chain((0..70).map(|i| START + 6_200_000 + i * 10_000)).collect()
}

#[test]
fn time_periods_hold_exactly_their_samples_and_read_alone() {
    for (zstd, journaled) in [(false, false), (true, false), (false, true)] {
        let d = dir(&format!("time-{zstd}-{journaled}"));
        let prefix = d.join("run");
        let mut s = storage();
        let mut scratch = vec![0u8; 4096];
        let mut config = WriterConfig::new(START, 10_000);
        if zstd {
            config = config.with_compression(Compression::Zstd);
        }
        let mut ws =
            vec![
                0u64;
                tachyon_core::compression::workspace_words(tachyon_core::compression::compressor_workspace_bytes())
            ];
        let mut out = vec![0u8; 1 << 16];
        let store = if zstd {
            s.storage().with_zstd(tachyon_core::compression::Compressor::new(&mut ws, &mut out).unwrap())
        } else {
            s.storage()
        };
        let journal = journaled.then(|| (&mut scratch[..], FlushPolicy { every_samples: 16, every_us: 0 }));
        let rotation = Rotation { every_us: SECOND, every_bytes: 0 };
        let mut w = RotatingWriter::create(&prefix, store, config, NativeEndian::default(), rotation, journal).unwrap();
        // An id interned before the first period ends, used in every period after.
        let root = w.intern_frame(Frame::new(b"app.py", b"main")).unwrap();
        for (i, ts) in timestamps().into_iter().enumerate() {
            let leaf = Frame::new(b"app.py", if i % 2 == 0 { b"even" } else { b"odd" });
            if i % 3 == 0 {
                w.write_thread_sample_ids(taken(ts, 1 + i as u64 % 3), [root]).unwrap();
            } else {
                w.write_thread_sample(taken(ts, 1 + i as u64 % 3), [leaf, Frame::new(b"app.py", b"main")]).unwrap();
            }
        }
        assert_eq!(w.sequence(), 3);
        w.finish().unwrap();
        let want: Vec<PathBuf> = [
            "run.00000000.5000000.pyb",
            "run.00000001.6000000.pyb",
            "run.00000002.7000000.pyb",
            "run.00000003.11000000.pyb",
        ]
        .iter()
        .map(|name| d.join(name))
        .collect();
        assert_eq!(files(&d), want, "zstd {zstd} journaled {journaled}");
        let mut all = vec![];
        for path in &want {
            assert_eq!(FileKind::detect(&std::fs::read(path).unwrap()), FileKind::Tachyon, "{}", path.display());
            let (start, samples) = read(path);
            for (_, ts, _) in &samples {
                assert!((start..start + SECOND).contains(ts), "{}: {ts} outside its period", path.display());
            }
            all.extend(samples);
        }
        // The reader gives a thread's REPEAT run when the run ended: in time order again.
        all.sort_by_key(|s| s.1);
        let want_ts = timestamps();
        assert_eq!(all.iter().map(|s| s.1).collect::<Vec<_>>(), want_ts);
        for (i, (thread, _, funcs)) in all.iter().enumerate() {
            assert_eq!(*thread, 1 + i as u64 % 3);
            let want: Vec<&[u8]> =
                if i % 3 == 0 { vec![b"main"] } else { vec![if i % 2 == 0 { b"even" } else { b"odd" }, b"main"] };
            assert_eq!(funcs.iter().map(|f| &f[..]).collect::<Vec<_>>(), want, "sample {i}");
        }
        std::fs::remove_dir_all(&d).unwrap();
    }
}

#[test]
fn size_periods_end_after_the_bytes_and_a_forced_rotation_ends_one_now() {
    let d = dir("size");
    let prefix = d.join("big");
    let mut s = storage();
    let rotation = Rotation { every_us: 0, every_bytes: 2000 };
    let mut w =
        RotatingWriter::create(&prefix, s.storage(), WriterConfig::new(0, 1000), LittleEndian, rotation, None).unwrap();
    for i in 0..1000u64 {
        let name = format!("f{}", i % 50);
        w.write_thread_sample(taken(i * 1000, 7), [Frame::new(b"x.py", name.as_bytes())]).unwrap();
        if i == 990 {
            w.rotate().unwrap();
        }
    }
    w.finish().unwrap();
    let paths = files(&d);
    assert!(paths.len() >= 4, "{} files", paths.len());
    let mut n = 0;
    for (seq, path) in paths.iter().enumerate() {
        let (start, samples) = read(path);
        assert_eq!(path, &d.join(format!("big.{seq:08}.{start}.pyb")));
        let records = std::fs::metadata(path).unwrap().len();
        assert!(!samples.is_empty());
        // The last (forced, then finished) periods are short; the others end just past the
        // limit: one sample's records more at most.
        if seq + 2 < paths.len() {
            assert!(records > 2000, "{}: {records}", path.display());
        }
        if seq + 1 < paths.len() {
            let first = samples.iter().map(|s| s.1).min().unwrap();
            assert_eq!(first, start, "a size period starts at its first sample");
        }
        n += samples.len();
    }
    assert_eq!(n, 1000);
    // The forced rotation: the period after it starts at sample 990's timestamp and holds
    // samples 991–999.
    let (start, last) = read(paths.last().unwrap());
    assert_eq!((start, last.len()), (990_000, 9));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_killed_journaled_period_salvages_to_its_last_flush_and_earlier_ones_are_complete() {
    let d = dir("kill");
    let prefix = d.join("live");
    let mut s = storage();
    let mut scratch = vec![0u8; 4096];
    let rotation = Rotation { every_us: SECOND, every_bytes: 0 };
    let journal = Some((&mut scratch[..], FlushPolicy { every_samples: 0, every_us: 0 }));
    let mut w = RotatingWriter::create(
        &prefix,
        s.storage(),
        WriterConfig::new(0, 1000),
        NativeEndian::default(),
        rotation,
        journal,
    )
    .unwrap();
    // 2.5 s of samples; a flush at 2.3 s; then the process "dies": the writer is leaked,
    // so nothing it holds reaches the file.
    for i in 0..250u64 {
        w.write_thread_sample(taken(i * 10_000, 1), [Frame::new(b"a.py", b"work")]).unwrap();
        if i == 230 {
            w.flush().unwrap();
        }
    }
    std::mem::forget(w);
    let paths = files(&d);
    assert_eq!(paths.len(), 3);
    for path in &paths[..2] {
        assert_eq!(FileKind::detect(&std::fs::read(path).unwrap()), FileKind::Tachyon, "{}", path.display());
        assert_eq!(read(path).1.len(), 100);
    }
    let stream = std::fs::read(&paths[2]).unwrap();
    assert_ne!(FileKind::detect(&stream), FileKind::Tachyon, "the live period is still the stream");
    let received = receive(&stream).unwrap();
    let salvaged = d.join("salvaged.pyb");
    std::fs::write(&salvaged, &received.file).unwrap();
    let (start, samples) = read(&salvaged);
    // Samples 200..=230 were flushed.
    assert_eq!((start, samples.len()), (2 * SECOND, 31));
    assert_eq!(samples.last().unwrap().1, 2_300_000);
    std::fs::remove_dir_all(&d).unwrap();
}
