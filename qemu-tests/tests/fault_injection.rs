//! Fault injection at every I/O call of every writer (issue 15): a sink that fails its k-th
//! call — write, seek or flush — for every k of a realistic stream, in two ways: an error
//! with nothing taken, or a short write (half the bytes taken) followed by an error on the
//! next call. After each, the writer has reported the error, and the file finished
//! afterwards (once the sink works again) holds exactly the samples the writer accepted:
//! checked by our readers against the stream itself, and for Tachyon by CPython 3.15.2's
//! reader too (feature `oracle`).

use std::collections::BTreeMap;
use tachyon_test_kit::Broken;

use embedded_io::{ErrorType, Seek, SeekFrom, Write};
use tachyon_core::compression::{compressor_workspace_bytes, workspace_words, Compressor};
use tachyon_core::gperftools as gp;
use tachyon_core::marshal::Encoder;
use tachyon_core::mojo;
use tachyon_core::storage::{VecWriterStorage, WriterCapacity};
use tachyon_core::transport::FramedSink;
use tachyon_core::{Compression, Frame, LittleEndian, Location, WriteError, Writer, WriterConfig};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// The call fails and takes nothing.
    Error,
    /// A write takes half its bytes (a seek or flush fails), and the next call fails.
    Short,
}

/// A file in memory whose `fail_at`-th call (counting writes, seeks and flushes) fails.
struct Faulty {
    data: Vec<u8>,
    pos: usize,
    calls: usize,
    fail_at: usize,
    fault: Fault,
    /// A short write happened: the next call fails.
    then_fail: bool,
    /// Calls that failed.
    failed: usize,
}

impl Faulty {
    fn new(fail_at: usize, fault: Fault) -> Self {
        Faulty { data: Vec::new(), pos: 0, calls: 0, fail_at, fault, then_fail: false, failed: 0 }
    }

    /// Counts a call; `Err` when it is to fail (a write that is to be short says so).
    fn call(&mut self, is_write: bool) -> Result<bool, Broken> {
        self.calls += 1;
        if std::mem::take(&mut self.then_fail)
            || (self.calls == self.fail_at && !(is_write && self.fault == Fault::Short))
        {
            self.failed += 1;
            return Err(Broken);
        }
        Ok(self.calls == self.fail_at)
    }
}

impl ErrorType for Faulty {
    type Error = Broken;
}

impl Write for Faulty {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Broken> {
        let short = self.call(true)?;
        let n = if short && buf.len() > 1 {
            self.then_fail = true;
            buf.len() / 2
        } else if short {
            self.failed += 1;
            return Err(Broken);
        } else {
            buf.len()
        };
        let end = self.pos + n;
        if self.data.len() < end {
            self.data.resize(end, 0);
        }
        self.data[self.pos..end].copy_from_slice(&buf[..n]);
        self.pos = end;
        Ok(n)
    }

    fn flush(&mut self) -> Result<(), Broken> {
        self.call(false).map(drop)
    }
}

impl Seek for Faulty {
    fn seek(&mut self, pos: SeekFrom) -> Result<u64, Broken> {
        self.call(false)?;
        self.pos = match pos {
            SeekFrom::Start(n) => n as usize,
            SeekFrom::Current(d) => (self.pos as i64 + d) as usize,
            SeekFrom::End(d) => (self.data.len() as i64 + d) as usize,
        };
        Ok(self.pos as u64)
    }
}

/// Runs `scenario` once with a sink that never fails to count its calls, then once per call
/// and fault; returns how many runs met a failure.
fn every_call(what: &str, mut scenario: impl FnMut(Faulty, &str) -> usize) -> usize {
    let calls = scenario(Faulty::new(0, Fault::Error), what);
    // A compressed stream of hundreds of samples is a handful of calls.
    assert!(calls > 5, "{what}: only {calls} calls: not a realistic stream");
    let mut met = 0;
    for fault in [Fault::Error, Fault::Short] {
        for k in 1..=calls {
            let failed = scenario(Faulty::new(k, fault), &format!("{what}, call {k} {fault:?}"));
            met += usize::from(failed > 0);
        }
    }
    assert!(met >= calls, "{what}: only {met} of {} runs met a failure", 2 * calls);
    met
}

// --- Tachyon -------------------------------------------------------------------------------

type Stack = Vec<(&'static str, &'static str, i32)>;

/// `(timestamp, thread, stack)`.
type Samples = Vec<(u64, u64, Stack)>;

/// 400 samples over three threads with changing stacks: several staging flushes, REPEAT
/// runs, every record kind.
fn tachyon_stream() -> Samples {
    let funcs = [("app.py", "main", 3), ("app.py", "work", 10), ("lib.py", "parse", 41), ("lib.py", "scan", 7)];
    (0..400u64)
        .map(|i| {
            let depth = 1 + (i / 3 % 4) as usize;
            let stack = (0..depth).rev().map(|d| funcs[(d + (i as usize / 50)) % 4]).collect();
            (1_000_000 + i * 997, i % 3, stack)
        })
        .collect()
}

/// Per thread: `(timestamp, [(file, function, line)])`.
type View = BTreeMap<u64, Vec<(u64, Vec<(String, String, i32)>)>>;

fn view_of(samples: &[(u64, u64, Stack)]) -> View {
    let mut v = View::new();
    for (ts, tid, stack) in samples {
        let frames = stack.iter().map(|&(f, n, l)| (f.to_string(), n.to_string(), l)).collect();
        v.entry(*tid).or_default().push((*ts, frames));
    }
    v
}

fn read_view(file: &[u8]) -> Result<View, String> {
    let lines = qemu_tests::decode_to_json(file)?;
    let mut v = View::new();
    for s in &lines[1..] {
        let frames = s["frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let line = f[2].as_array().map_or(-1, |l| l[0].as_i64().unwrap() as i32);
                (f[0].as_str().unwrap().to_string(), f[1].as_str().unwrap().to_string(), line)
            })
            .collect();
        v.entry(s["tid"].as_u64().unwrap()).or_default().push((s["ts"].as_u64().unwrap(), frames));
    }
    Ok(v)
}

const CAP: WriterCapacity =
    WriterCapacity { string_bytes: 1 << 12, strings: 64, frames: 64, threads: 8, rle_budget: 64 };

/// Writes the stream through `sink`, retrying a failed finish; returns the sink and what
/// was accepted (`None`: the constructor failed, nothing to finish).
fn write_tachyon<W: Write + Seek>(sink: W, zstd: bool) -> Option<(W, Samples)>
where
    W::Error: std::fmt::Debug,
{
    let mut storage = VecWriterStorage::new(CAP).unwrap();
    let mut workspace = vec![0u64; workspace_words(compressor_workspace_bytes())];
    let mut out = vec![0u8; 512];
    let config = WriterConfig::new(1_000_000, 1000);
    let made = if zstd {
        let c = Compressor::new(&mut workspace, &mut out).unwrap();
        Writer::with_endian(
            sink,
            storage.storage().with_zstd(c),
            config.with_compression(Compression::Zstd),
            LittleEndian,
        )
    } else {
        Writer::with_endian(sink, storage.storage(), config, LittleEndian)
    };
    let mut w = match made {
        Ok(w) => w,
        Err(WriteError::Sink { .. }) => return None,
        Err(e) => panic!("{e:?}"),
    };
    let mut accepted = Vec::new();
    for (ts, tid, stack) in tachyon_stream() {
        let frames = stack.iter().map(|&(f, n, l)| {
            Frame::new(f.as_bytes(), n.as_bytes()).at(Location { lineno: l, end_lineno: l, col: 0, end_col: 4 })
        });
        match w.write_thread_sample(ts, 0, tid, 0, frames) {
            Ok(()) => accepted.push((ts, tid, stack)),
            Err(WriteError::Sink { .. }) => {}
            Err(e) => panic!("{e:?}"),
        }
    }
    let mut tries = 0;
    while let Err(e) = w.finish() {
        assert!(matches!(e, WriteError::Sink { .. }), "{e:?}");
        tries += 1;
        assert!(tries < 4, "finish keeps failing");
    }
    Some((w.into_inner(), accepted))
}

/// The Tachyon files of every fault, raw and zstd, each with the view it must read as.
fn tachyon_files() -> Vec<(String, Vec<u8>, View)> {
    let mut files = Vec::new();
    for zstd in [false, true] {
        every_call(if zstd { "tachyon zstd" } else { "tachyon raw" }, |sink, what| {
            let Some((sink, accepted)) = write_tachyon(sink, zstd) else { return 1 };
            let failed = sink.failed;
            if sink.fail_at == 0 {
                return sink.calls;
            }
            files.push((what.to_string(), sink.data, view_of(&accepted)));
            failed
        });
    }
    files
}

#[test]
fn tachyon_files_hold_exactly_the_accepted_samples() {
    let files = tachyon_files();
    let mut refused = 0;
    for (what, file, want) in &files {
        let got = read_view(file).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(&got, want, "{what}");
        refused += 400 - want.values().map(Vec::len).sum::<usize>();
    }
    assert!(refused > 100, "only {refused} samples refused over {} runs", files.len());
}

/// CPython 3.15.2 reads every fault-injected file as our reader does.
#[cfg(feature = "oracle")]
#[test]
fn cpython_reads_the_fault_injected_tachyon_files() {
    qemu_tests::inputs::oracle_ready();
    let work = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fault_injection");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let files = tachyon_files();
    let mut jobs = Vec::new();
    for (i, (_, file, _)) in files.iter().enumerate() {
        let path = work.join(format!("{i}.pyb"));
        std::fs::write(&path, file).unwrap();
        jobs.push((path, work.join(format!("{i}.jsonl"))));
    }
    qemu_tests::inputs::cpython_dump(&work, "faults", &jobs);
    for ((what, file, _), (_, dump)) in files.iter().zip(&jobs) {
        let theirs = qemu_tests::parse_jsonl(&std::fs::read_to_string(dump).unwrap());
        let ours = qemu_tests::decode_to_json(file).unwrap();
        qemu_tests::compare_views(what, &ours, &theirs).unwrap();
    }
}

// --- the framed transport -------------------------------------------------------------------

/// A link that fails as [`Faulty`] does (it cannot seek: a UART).
struct Link(Faulty);

impl ErrorType for Link {
    type Error = Broken;
}

impl Write for Link {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Broken> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> Result<(), Broken> {
        self.0.flush()
    }
}

#[test]
fn a_failing_link_gives_the_accepted_samples_or_a_named_refusal() {
    let (mut exact, mut refused) = (0, 0);
    every_call("transport", |link, what| {
        let counting = link.fail_at == 0;
        let mut scratch = [0u8; 128];
        let Ok(sink) = FramedSink::new(Link(link), &mut scratch) else { return 1 };
        let Some((mut sink, accepted)) = write_tachyon(sink, false) else { return 1 };
        let mut tries = 0;
        while sink.finish().is_err() {
            tries += 1;
            assert!(tries < 4, "{what}: end keeps failing");
        }
        let link = sink.into_inner().0;
        if counting {
            return link.calls;
        }
        // A frame cut short is refused by name; otherwise the file is exactly what was
        // accepted, never a file that silently differs.
        match tachyon::tachyon::receive::reassemble(&link.data) {
            Ok(file) => {
                assert_eq!(read_view(&file).unwrap_or_else(|e| panic!("{what}: {e}")), view_of(&accepted), "{what}");
                exact += 1;
            }
            Err(e) => {
                assert!(link.fault == Fault::Short, "{what}: {e}");
                refused += 1;
            }
        }
        link.failed
    });
    assert!(exact > 20 && refused > 0, "{exact} exact, {refused} refused");
}

// --- gperftools ---------------------------------------------------------------------------

#[test]
fn gperftools_files_hold_exactly_the_accepted_records() {
    let records: Vec<(u64, Vec<u64>)> =
        (1..=40u64).map(|i| (i % 7 + 1, (0..1 + i % 9).map(|k| 0x40_0000 + 0x10 * k + i).collect())).collect();
    every_call("gperftools", |sink, what| {
        let counting = sink.fail_at == 0;
        let mut staging = [0u8; 256];
        let mut w =
            match gp::Writer::with_format(Link(sink), &mut staging, gp::Word64, LittleEndian, &gp::Header::default()) {
                Ok(w) => w,
                Err(gp::WriteError::Sink { .. }) => return 1,
                Err(e) => panic!("{e:?}"),
            };
        let mut accepted = Vec::new();
        for (count, pcs) in &records {
            match w.write_record(*count, pcs) {
                Ok(()) | Err(gp::WriteError::Sink { accepted: true, .. }) => accepted.push((*count, pcs.clone())),
                Err(gp::WriteError::Sink { accepted: false, .. }) => {}
                Err(e) => panic!("{what}: {e:?}"),
            }
        }
        let mut tries = 0;
        while let Err(e) = w.finish(b"maps") {
            assert!(matches!(e, gp::WriteError::Sink { .. }), "{what}: {e:?}");
            tries += 1;
            assert!(tries < 4, "{what}: finish keeps failing");
        }
        let sink = w.into_inner().0;
        if counting {
            return sink.calls;
        }
        let mut window = vec![0u8; 4096];
        let mut r = gp::Reader::open(tachyon_core::io::Cursor::new(&sink.data[..]), &mut window)
            .unwrap_or_else(|e| panic!("{what}: {e:?}"));
        let mut got = Vec::new();
        while let Some(item) = r.next_item().unwrap_or_else(|e| panic!("{what}: {e:?}")) {
            if let gp::Item::Record(rec) = item {
                got.push((rec.count, rec.pcs.iter().collect::<Vec<u64>>()));
            }
        }
        assert_eq!(got, accepted, "{what}");
        sink.failed
    });
}

// --- MOJO ---------------------------------------------------------------------------------

#[test]
fn mojo_files_hold_exactly_the_accepted_events() {
    use mojo::Event;
    let mut names: Vec<Vec<u8>> = Vec::new();
    for i in 0..30u64 {
        names.push(format!("function_{i}").into_bytes());
    }
    every_call("mojo", |sink, what| {
        let counting = sink.fail_at == 0;
        let mut staging = [0u8; 64];
        let mut w = match mojo::Writer::new(Link(sink), &mut staging, 3) {
            Ok(w) => w,
            Err(mojo::WriteError::Sink { .. }) => return 1,
            Err(e) => panic!("{e:?}"),
        };
        let mut accepted: Vec<Event<Vec<u8>>> = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let events: [Event<&[u8]>; 3] = [
                Event::String { key: i as u64 + 2, value: name },
                Event::Time(1000 + i as i64),
                Event::Memory(-(i as i64)),
            ];
            for e in &events {
                match w.write(e) {
                    Ok(()) | Err(mojo::WriteError::Sink { accepted: true, .. }) => accepted.push(e.map(<[u8]>::to_vec)),
                    Err(mojo::WriteError::Sink { accepted: false, .. }) => {}
                    Err(e) => panic!("{what}: {e:?}"),
                }
            }
        }
        let mut tries = 0;
        while w.flush().is_err() {
            tries += 1;
            assert!(tries < 4, "{what}: flush keeps failing");
        }
        let sink = w.into_inner().0;
        if counting {
            return sink.calls;
        }
        let mut window = vec![0u8; 4096];
        let mut r = mojo::Reader::open(tachyon_core::io::Cursor::new(&sink.data[..]), &mut window)
            .unwrap_or_else(|e| panic!("{what}: {e:?}"));
        let mut got = Vec::new();
        while let Some((_, e)) = r.next_item().unwrap_or_else(|e| panic!("{what}: {e:?}")) {
            got.push(e.map(<[u8]>::to_vec));
        }
        assert_eq!(got, accepted, "{what}");
        sink.failed
    });
}

// --- pstats marshal -------------------------------------------------------------------------

/// The marshal encoder has no finish: a sink error is reported at the call it happens in,
/// and what reached the sink is a prefix of the whole file.
#[test]
fn marshal_errors_are_reported_and_leave_a_prefix() {
    let write = |sink: Link| -> (Link, bool) {
        let mut e = Encoder::new(sink);
        let mut run = || -> Result<(), tachyon_core::marshal::EncodeError<Broken>> {
            e.dict()?;
            for i in 0..40i128 {
                e.tuple(3)?;
                e.str(b"lib/module.py")?;
                e.int(i)?;
                e.str(format!("function_{i}").as_bytes())?;
                e.tuple(5)?;
                e.int(i)?;
                e.int(i + 1)?;
                e.float(0.25)?;
                e.float(0.5)?;
                e.dict()?;
                e.end_dict()?;
            }
            e.end_dict()
        };
        let failed = run().is_err();
        (e.into_inner(), failed)
    };
    let (whole, _) = write(Link(Faulty::new(0, Fault::Error)));
    let whole = whole.0;
    every_call("marshal", |sink, what| {
        let (link, reported) = write(Link(sink));
        let sink = link.0;
        if sink.fail_at == 0 {
            return sink.calls;
        }
        assert!(reported, "{what}: the failure was not reported");
        assert!(whole.data.starts_with(&sink.data), "{what}: not a prefix");
        sink.failed
    });
    // The whole file loads as pstats loads it.
    assert_eq!(tachyon::pstats::load(&whole.data).unwrap().entries.len(), 40);
}
