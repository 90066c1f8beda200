//! Rotation (`tachyon::tachyon::rotate`): a run written as period files, each complete and
//! readable on its own, named by sequence and start, holding exactly the samples written in
//! its period; frame ids interned in one period valid in every later one; a journaled
//! period killed before its end salvaged with every sample up to its last flush.

use std::path::{Path, PathBuf};

use tachyon::tachyon::receive::{receive, InPlace};
use tachyon::tachyon::rotate::{recover, EndedPeriod, Recovered, Recovery, RotatingWriter, Rotation};
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

/// A journaled rotating writer into `prefix`: one-second periods, flushed every 16 samples.
fn journaled<'s, 'b>(
    prefix: &Path,
    s: &'s mut VecWriterStorage,
    scratch: &'b mut [u8],
) -> RotatingWriter<'s, 'b, NativeEndian> {
    journaled_with(prefix, s, scratch, WriterConfig::new(0, 1000))
}

/// [`journaled`] with the writer's start time and interval from `config`.
fn journaled_with<'s, 'b>(
    prefix: &Path,
    s: &'s mut VecWriterStorage,
    scratch: &'b mut [u8],
    config: WriterConfig,
) -> RotatingWriter<'s, 'b, NativeEndian> {
    let rotation = Rotation { every_us: SECOND, every_bytes: 0 };
    let journal = Some((scratch, FlushPolicy { every_samples: 16, every_us: 0 }));
    RotatingWriter::create(prefix, s.storage(), config, NativeEndian::default(), rotation, journal).unwrap()
}

#[test]
fn each_ended_period_is_told_once_complete_before_the_next_file_exists() {
    let d = dir("told");
    let prefix = d.join("run");
    let mut s = storage();
    let mut scratch = vec![0u8; 4096];
    let mut w = journaled(&prefix, &mut s, &mut scratch);
    let told = std::sync::Arc::new(std::sync::Mutex::new(Vec::<EndedPeriod>::new()));
    let (log, folder) = (told.clone(), d.clone());
    w.on_period_end(move |p| {
        // The instant a hand-over's kill is most likely to hit: the ended period is complete
        // and no later period's file exists yet.
        assert_eq!(FileKind::detect(&std::fs::read(&p.path).unwrap()), FileKind::Tachyon, "{}", p.path.display());
        assert_eq!(files(&folder).last(), Some(&p.path), "a file after the ended period's");
        assert_eq!(std::fs::metadata(&p.path).unwrap().len(), p.size);
        log.lock().unwrap().push(p.clone());
    });
    // 3.5 s of samples, 3 per 10 ms from two threads; a rotation by hand at 1.55 s.
    for i in 0..350u64 {
        for k in 0..3 {
            w.write_thread_sample(taken(i * 10_000, 1 + k % 2), [Frame::new(b"a.py", b"work")]).unwrap();
        }
        if i == 155 {
            w.rotate().unwrap();
        }
    }
    let size = w.finish().unwrap();
    // A second finish tells nothing again.
    assert_eq!(w.finish().unwrap(), size);
    let told = told.lock().unwrap().clone();
    let paths = files(&d);
    assert_eq!(told.iter().map(|p| p.path.clone()).collect::<Vec<_>>(), paths);
    // The forced period starts at the latest sample (1.55 s), and the grid goes on from there.
    let want_counts = [300, 168, 297, 285];
    let want_starts = [0, SECOND, 1_550_000, 2_550_000];
    assert_eq!(told.len(), want_counts.len());
    for (i, (p, path)) in told.iter().zip(&paths).enumerate() {
        let (start, samples) = read(path);
        assert_eq!((p.sequence, p.start_time_us, start), (i as u64, want_starts[i], want_starts[i]));
        assert_eq!((p.samples, samples.len() as u64), (want_counts[i], want_counts[i]), "{}", path.display());
        assert_eq!(p.threads, 2);
    }
    assert_eq!(told.last().unwrap().size, size);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn recover_makes_every_period_of_a_killed_hand_over_a_profile() {
    let d = dir("recover");
    let prefix = d.join("run");
    let mut s = storage();
    let mut scratch = vec![0u8; 4096];
    let mut w = journaled(&prefix, &mut s, &mut scratch);
    for i in 0..250u64 {
        w.write_thread_sample(taken(i * 10_000, 1), [Frame::new(b"a.py", b"work")]).unwrap();
    }
    w.flush().unwrap();
    std::mem::forget(w);
    let paths = files(&d);
    assert_eq!(paths.len(), 3);
    // A kill in period 1's hand-over, after its stream was finished and while its file was
    // being written beside it: period 1 is its complete stream again, with the partial
    // `.PID.receiving` file beside it; period 2's stream was never made.
    let complete = std::fs::read(&paths[1]).unwrap();
    assert_eq!(FileKind::detect(&complete), FileKind::Tachyon);
    std::fs::write(&paths[1], stream_of(&complete)).unwrap();
    let leftover = d.join("run.00000001.1000000.pyb.4242.receiving");
    std::fs::write(&leftover, &complete[..complete.len() / 2]).unwrap();
    let cut = std::fs::read(&paths[2]).unwrap();
    std::fs::remove_file(&paths[2]).unwrap();
    // Another run's files under another prefix, and a stray file, are left alone.
    let other = d.join("other.00000000.0.pyb");
    std::fs::write(&other, &cut).unwrap();
    std::fs::write(d.join("run.notes.txt"), b"x").unwrap();

    let done = recover(&prefix).unwrap();
    let outcomes: Vec<(PathBuf, Recovery)> = done.into_iter().map(|r| (r.path, r.outcome)).collect();
    assert_eq!(
        outcomes,
        [
            (leftover.clone(), Recovery::LeftoverRemoved),
            (paths[0].clone(), Recovery::Period(InPlace::Complete)),
            (paths[1].clone(), Recovery::Period(InPlace::Received)),
        ]
    );
    assert!(!leftover.exists());
    assert_eq!(std::fs::read(&paths[1]).unwrap(), complete);
    assert_eq!(std::fs::read(&other).unwrap(), cut, "another prefix's file changed");
    // Recovered twice: nothing more to do.
    let again: Vec<Recovery> = recover(&prefix).unwrap().into_iter().map(|r| r.outcome).collect();
    assert_eq!(again, [Recovery::Period(InPlace::Complete); 2]);

    // A folder: every period file in it, the cut stream of the live period salvaged up to its
    // last flush (samples 200..=249).
    let done = recover(&d).unwrap();
    let salvaged: Vec<&Recovered> =
        done.iter().filter(|r| matches!(r.outcome, Recovery::Period(InPlace::Salvaged(_)))).collect();
    assert_eq!(salvaged.len(), 1);
    assert_eq!(salvaged[0].path, other);
    assert_eq!(read(&other).1.len(), 50);

    // Killed after the next period's file was made and before its header reached it: the
    // newest file is empty, and is removed; an empty file before the newest is not a
    // hand-over's and is refused.
    let e = dir("recover-empty");
    std::fs::write(e.join("cut.00000000.0.pyb"), &complete).unwrap();
    std::fs::write(e.join("cut.00000001.1000000.pyb"), b"").unwrap();
    let outcomes: Vec<Recovery> = recover(&e.join("cut")).unwrap().into_iter().map(|r| r.outcome).collect();
    assert_eq!(outcomes, [Recovery::Period(InPlace::Complete), Recovery::EmptyRemoved]);
    assert_eq!(files(&e), [e.join("cut.00000000.0.pyb")]);
    std::fs::write(e.join("cut.00000000.0.pyb"), b"").unwrap();
    std::fs::write(e.join("cut.00000001.1000000.pyb"), &complete).unwrap();
    assert!(recover(&e.join("cut")).is_err());
    std::fs::remove_dir_all(&e).unwrap();
    std::fs::remove_dir_all(&d).unwrap();
}

/// The journaled stream of a complete file, as a writer would send it (header, tables in the
/// journal, the whole file in writes, `End`).
fn stream_of(file: &[u8]) -> Vec<u8> {
    use embedded_io::Write as _;
    use tachyon_core::transport::FramedSink;
    let mut out = tachyon::file::StdIo(Vec::new());
    let mut frame = vec![0u8; 4096];
    let mut sink = FramedSink::new(&mut out, &mut frame).unwrap();
    sink.write_all(file).unwrap();
    sink.finish().unwrap();
    out.0
}

#[test]
fn the_command_names_a_stream_and_receives_a_killed_runs_prefix() {
    use assert_cmd::Command;
    let d = dir("command");
    let prefix = d.join("run");
    let mut s = storage();
    let mut scratch = vec![0u8; 4096];
    let mut w = journaled(&prefix, &mut s, &mut scratch);
    for i in 0..150u64 {
        w.write_thread_sample(taken(i * 10_000, 1), [Frame::new(b"a.py", b"work")]).unwrap();
    }
    w.flush().unwrap();
    std::mem::forget(w);
    let live = d.join("run.00000001.1000000.pyb");
    for command in ["verify", "info"] {
        let out = Command::cargo_bin("tachyon").unwrap().arg(command).arg(&live).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{command}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains("a framed stream") && err.contains("`tachyon receive "), "{command}: {err}");
    }
    // A capture file without -o, a folder with -o, a prefix with no periods: refused.
    let tachyon = || Command::cargo_bin("tachyon").unwrap();
    tachyon().arg("receive").arg(&live).assert().code(1);
    tachyon().arg("receive").arg(&d).arg("-o").arg(d.join("x.pyb")).assert().code(1);
    tachyon().arg("receive").arg(d.join("nothing")).assert().code(1);
    let out = tachyon().arg("receive").arg(&prefix).output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("run.00000001.1000000.pyb: now a profile: the stream was cut"), "{err}");
    assert!(err.contains("2 period files, 1 of them complete already"), "{err}");
    assert_eq!(read(&live).1.len(), 50);
    tachyon().arg("verify").arg(&live).assert().success();
    std::fs::remove_dir_all(&d).unwrap();
}

/// `tachyon top` of a journaled rotating run still being written: the ended periods' files
/// and the live period's stream, each function's own and total samples as the workload
/// makes them (every third sample `main` alone, the others `even` or `odd` under `main`).
#[test]
fn top_counts_a_live_rotating_run() {
    use tachyon::top::{Counts, SortBy};
    let d = dir("top");
    let prefix = d.join("run");
    let mut s = storage();
    let mut scratch = vec![0u8; 4096];
    let mut w = journaled_with(&prefix, &mut s, &mut scratch, WriterConfig::new(START, 10_000));
    let stamps = timestamps();
    for (i, &ts) in stamps.iter().enumerate() {
        let leaf = Frame::new(b"app.py", if i % 2 == 0 { b"even" } else { b"odd" });
        let stack =
            if i % 3 == 0 { vec![Frame::new(b"app.py", b"main")] } else { vec![leaf, Frame::new(b"app.py", b"main")] };
        w.write_thread_sample(taken(ts, 1 + i as u64 % 3), stack).unwrap();
    }
    w.flush().unwrap();
    // The live period is a stream: the run has not ended.
    let live = files(&d).pop().unwrap();
    assert_eq!(FileKind::detect(&std::fs::read(&live).unwrap()), FileKind::Unknown, "{}", live.display());

    let n = stamps.len() as u64;
    let (main_own, even, odd) = (
        (0..n).filter(|i| i % 3 == 0).count() as u64,
        (0..n).filter(|i| i % 3 != 0 && i % 2 == 0).count() as u64,
        (0..n).filter(|i| i % 3 != 0 && i % 2 == 1).count() as u64,
    );
    let mut counts = Counts::new(None);
    counts.add_path(&prefix).unwrap();
    let rows: Vec<(String, u64, u64)> =
        counts.table(SortBy::Name).into_iter().map(|r| (r.function, r.own, r.total)).collect();
    assert_eq!(counts.samples(), n);
    assert_eq!(
        rows,
        vec![("even".to_owned(), even, even), ("main".to_owned(), main_own, n), ("odd".to_owned(), odd, odd)]
    );
    assert_eq!(counts.threads().iter().copied().collect::<Vec<_>>(), vec![1, 2, 3]);
    // One thread: its samples only.
    let mut one = Counts::new(Some(2));
    one.add_path(&d).unwrap();
    assert_eq!(one.samples(), (0..n).filter(|i| i % 3 == 1).count() as u64);
    drop(w);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn top_follow_reads_again_only_what_changed() {
    use tachyon::top::{Counts, Follow, SortBy};
    let d = dir("follow");
    let prefix = d.join("run");
    let mut s = storage();
    let mut scratch = vec![0u8; 4096];
    let mut w = journaled_with(&prefix, &mut s, &mut scratch, WriterConfig::new(START, 10_000));
    let write = |w: &mut RotatingWriter<'_, '_, _>, stamps: &[u64]| {
        for (i, &ts) in stamps.iter().enumerate() {
            let leaf = Frame::new(b"app.py", if i % 2 == 0 { b"even" } else { b"odd" });
            w.write_thread_sample(taken(ts, 1 + i as u64 % 3), vec![leaf, Frame::new(b"app.py", b"main")]).unwrap();
        }
        w.flush().unwrap();
    };
    let stamps = timestamps();
    let (first, later) = stamps.split_at(290);
    write(&mut w, first);
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    // What counting everything from nothing gives, for one thread or all.
    let afresh = |thread| {
        let mut c = Counts::new(thread);
        c.add_path(&prefix).unwrap();
        c.json(SortBy::Name)
    };

    let mut follow = Follow::new(&prefix, None);
    let mut two = Follow::new(&prefix, Some(2));
    assert_eq!(follow.refresh().unwrap().json(SortBy::Name), afresh(None));
    assert_eq!(two.refresh().unwrap().json(SortBy::Name), afresh(Some(2)));
    // The last 1.5 s of sample time, kept per file and merged: as counted afresh.
    let recent = |counts: Counts| counts.recent().unwrap().json(SortBy::Name);
    let afresh_window = || {
        let mut c = Counts::windowed(None, 1_500_000);
        c.add_path(&prefix).unwrap();
        recent(c)
    };
    let mut windowed = Follow::windowed(&prefix, None, 1_500_000);
    let got = windowed.refresh().unwrap();
    assert_eq!(recent(got.clone()), afresh_window());
    assert!(got.recent().unwrap().samples() > 0 && got.recent().unwrap().samples() < got.samples());
    // Again, nothing changed: the buckets each file kept still make the span.
    assert_eq!(recent(windowed.refresh().unwrap()), afresh_window());
    let periods = files(&d);
    assert_eq!(periods.len(), 3, "{periods:?}");
    assert_eq!(follow.bytes_read(), periods.iter().map(|p| size(p)).sum::<u64>());

    // Nothing changed: nothing is read.
    assert_eq!(follow.refresh().unwrap().json(SortBy::Name), afresh(None));
    assert_eq!(follow.bytes_read(), 0);

    // The live period (7.0-8.0 s) grows: only the bytes its stream gained are read.
    let live = periods.last().unwrap().clone();
    let before = size(&live);
    let more: Vec<u64> = (0..30).map(|k| START + 2_891_000 + k * 3_000).collect();
    write(&mut w, &more);
    assert_eq!(files(&d), periods);
    assert_eq!(follow.refresh().unwrap().json(SortBy::Name), afresh(None));
    assert!(size(&live) > before);
    assert_eq!(follow.bytes_read(), size(&live) - before);

    // The live period ends and a new one begins: the ended one is read, then kept.
    write(&mut w, later);
    let periods = files(&d);
    assert_eq!(periods.len(), 4, "{periods:?}");
    let counts = follow.refresh().unwrap();
    assert_eq!(counts.json(SortBy::Name), afresh(None));
    assert_eq!(counts.samples(), (stamps.len() + 30) as u64);
    assert_eq!(follow.bytes_read(), size(&live) + size(&periods[3]));
    assert_eq!(two.refresh().unwrap().json(SortBy::Name), afresh(Some(2)));
    // Later refreshes, after the files' buckets older than the span were dropped.
    assert_eq!(recent(windowed.refresh().unwrap()), afresh_window());

    // A kept period removed (a writer's retention): its counts leave with it, nothing is
    // read.
    std::fs::remove_file(&periods[0]).unwrap();
    let counts = follow.refresh().unwrap();
    assert_eq!(counts.json(SortBy::Name), afresh(None));
    assert!(counts.samples() < stamps.len() as u64);
    assert_eq!(follow.bytes_read(), 0);
    assert_eq!(two.refresh().unwrap().json(SortBy::Name), afresh(Some(2)));
    drop(w);
    std::fs::remove_dir_all(&d).unwrap();
}
