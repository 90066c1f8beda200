//! A conversion as a user asks for it: one input file, the output's name and every option
//! the `tachyon convert` command takes ([`ConvertRequest`]), checked and turned into the
//! [`Output`] and [`SourceOptions`] the pipeline takes, then run ([`convert_file`]). The
//! command and the Python package's `convert()` both call this, so the same request gives
//! the same bytes from either.

use std::fmt;
use std::path::{Path, PathBuf};

use tachyon_core::gperftools::RunTimeWord;
use tachyon_core::kind::FileKind;
use tachyon_core::Compression;

use crate::choice::Choice;
use crate::model::fold::{Fold, FoldError, FoldOptions, Folded};
use crate::mojo::source::MojoMetric;
use crate::output::{ConvertError, Destination, Output, OutputKind, SortOrder};
use crate::pprof::source::SampleIndex;
use crate::profile::{AnySource, Profile, ProfileError, SourceOptions};
use crate::pstats::source::PstatsOptions;

/// A file's name for a title (the whole path if it has none).
pub fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

crate::choices! {
    /// Byte order of a Tachyon or gperftools output.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ByteOrder {
        /// This machine's.
        Native = "native",
        /// Little-endian (x86_64, aarch64).
        Little = "little",
        /// Big-endian (s390x, PowerPC).
        Big = "big",
    }
}

impl ByteOrder {
    /// True for big-endian output.
    pub fn is_big(self) -> bool {
        match self {
            ByteOrder::Big => true,
            ByteOrder::Little => false,
            ByteOrder::Native => cfg!(target_endian = "big"),
        }
    }
}

/// How inputs are read: native addresses (gperftools, pprof) named, pprof values chosen, MOJO
/// samples weighed.
#[derive(Debug, Clone, Default)]
pub struct InputOptions {
    /// pprof: the sample value counted, by 0-based index or type name.
    pub sample_index: Option<String>,
    /// Folders where the profiled binaries are looked for first.
    pub binary_path: Vec<PathBuf>,
    /// Leave native addresses as `0x…`.
    pub no_symbolize: bool,
    /// MOJO: what a sample weighs.
    pub metric: Option<MojoMetric>,
    /// Without `sample_index`, count pprof's first `count` type (outputs made of samples).
    pub counts_by_default: bool,
}

impl InputOptions {
    /// What the library's sources take, with `pstats` for a pstats input.
    pub fn source_options(&self, pstats: PstatsOptions) -> SourceOptions {
        let default = if self.counts_by_default { SampleIndex::Counts } else { SampleIndex::Default };
        SourceOptions {
            sample_index: self.sample_index.as_deref().map_or(default, |s| s.parse().unwrap_or_default()),
            metric: self.metric.unwrap_or_default(),
            symbolize: (!self.no_symbolize).then(|| self.binary_path.clone()),
            pstats,
            replayable: false,
        }
    }
}

/// One conversion: the output and each option `tachyon convert` takes (its `--help` says
/// what each does). Options of another output are refused by [`convert_file`].
#[derive(Debug, Clone)]
pub struct ConvertRequest {
    /// The output.
    pub to: OutputKind,
    /// pstats: leave out 3.15's sampled-stats marker.
    pub pstats_compat: bool,
    /// pstats from pstats input: keep 3.15's marker.
    pub keep_sampled_marker: bool,
    /// pstats-text: row order.
    pub sort: Option<String>,
    /// pstats-text: most rows.
    pub limit: Option<usize>,
    /// pstats-text (pstats input): `print_stats(*restrictions)`.
    pub restrict: Vec<String>,
    /// pstats-text: no summary (sample inputs).
    pub no_summary: bool,
    /// pstats-text (pstats input): `strip_dirs()`.
    pub strip_dirs: bool,
    /// pstats-text (pstats input): `print_callers`.
    pub callers: bool,
    /// pstats-text (pstats input): `print_callees`.
    pub callees: bool,
    /// flamegraph: title (default: the input's file name).
    pub title: Option<String>,
    /// heatmap: `OLD=NEW` source path prefixes.
    pub source_roots: Vec<String>,
    /// tachyon, gperftools: byte order (default: the input's).
    pub byte_order: Option<ByteOrder>,
    /// tachyon: compression (default: the input's).
    pub compression: Option<Compression>,
    /// gperftools: slot width in bits, 32 or 64.
    pub word_size: Option<u8>,
    /// mojo: MOJO version, 1 to 4.
    pub mojo_version: Option<u8>,
    /// otlp, otlp-json: the resource's `service.name`.
    pub service_name: Option<String>,
    /// How the input is read.
    pub input: InputOptions,
}

impl ConvertRequest {
    /// A request for `to` with every option at its default.
    pub fn new(to: OutputKind) -> Self {
        ConvertRequest {
            to,
            pstats_compat: false,
            keep_sampled_marker: false,
            sort: None,
            limit: None,
            restrict: Vec::new(),
            no_summary: false,
            strip_dirs: false,
            callers: false,
            callees: false,
            title: None,
            source_roots: Vec::new(),
            byte_order: None,
            compression: None,
            word_size: None,
            mojo_version: None,
            service_name: None,
            input: InputOptions::default(),
        }
    }

    /// The options given (by their command-line names) that belong to another output.
    fn foreign_option(&self) -> Option<String> {
        let given = [
            ("pstats-compat", self.pstats_compat),
            ("keep-sampled-marker", self.keep_sampled_marker),
            ("sort", self.sort.is_some()),
            ("limit", self.limit.is_some()),
            ("no-summary", self.no_summary),
            ("strip-dirs", self.strip_dirs),
            ("callers", self.callers),
            ("callees", self.callees),
            ("title", self.title.is_some()),
            ("source-root", !self.source_roots.is_empty()),
            ("byte-order", self.byte_order.is_some()),
            ("compression", self.compression.is_some()),
            ("word-size", self.word_size.is_some()),
            ("mojo-version", self.mojo_version.is_some()),
            ("service-name", self.service_name.is_some()),
        ];
        given.into_iter().filter(|(_, on)| *on).map(|(name, _)| name).find_map(|option| {
            let owners: Vec<String> = OutputKind::owning(option).map(|o| o.to_string()).collect();
            (!owners.is_empty() && !self.to.options().contains(&option))
                .then(|| format!("{option} only applies to --to {}", owners.join(" or --to ")))
        })
    }

    /// The output, for an input that is (`pstats_input`) or is not a pstats file.
    fn output(&self, file: &Path, pstats_input: bool) -> Result<Output, RequestError> {
        let usage = |m: String| Err(RequestError::Usage(m));
        if let Some(m) = self.foreign_option() {
            return usage(m);
        }
        if self.word_size.is_some_and(|w| w != 32 && w != 64) {
            return usage("word-size must be 32 or 64".into());
        }
        if self.mojo_version.is_some_and(|v| !(1..=4).contains(&v)) {
            return usage("mojo-version must be 1 to 4".into());
        }
        if self.callers && self.callees {
            return usage("callers and callees cannot both be given".into());
        }
        if self.limit.is_some() && !self.restrict.is_empty() {
            return usage("limit and restrict cannot both be given".into());
        }
        if pstats_input {
            // The table, the file and the graph of a pstats input take pstats' own options.
            if self.no_summary && self.to == OutputKind::PstatsText {
                return usage("--no-summary applies to sample inputs only".into());
            }
            if self.pstats_compat && self.to == OutputKind::Pstats {
                return usage("--pstats-compat applies to sample inputs (pstats input leaves the marker out unless --keep-sampled-marker)".into());
            }
            if self.to == OutputKind::PstatsText {
                return Ok(Output::PstatsText {
                    sort: SortOrder::Nsamples,
                    limit: self.limit,
                    summary: !self.no_summary,
                });
            }
        } else {
            let given = [
                ("strip-dirs", self.strip_dirs),
                ("callers", self.callers),
                ("callees", self.callees),
                ("keep-sampled-marker", self.keep_sampled_marker),
                ("restrict", !self.restrict.is_empty()),
            ];
            if let Some((option, _)) = given.iter().find(|(_, on)| *on) {
                return usage(format!("--{option} applies to pstats input only"));
            }
        }
        let file_name = || file_name(file);
        Ok(match self.to {
            OutputKind::Collapsed => Output::Collapsed,
            OutputKind::Pstats => Output::Pstats { compat: self.pstats_compat },
            OutputKind::PstatsText => Output::PstatsText {
                sort: match self.sort.as_deref() {
                    None => SortOrder::Nsamples,
                    Some(s) => SortOrder::from_name(s).ok_or_else(|| {
                        RequestError::Usage(format!("--sort {s}: for this input one of {}", SortOrder::names_listed()))
                    })?,
                },
                limit: Some(self.limit.unwrap_or(15)),
                summary: !self.no_summary,
            },
            OutputKind::Jsonl => Output::Jsonl { run_id: None },
            OutputKind::Flamegraph => Output::Flamegraph { title: self.title.clone().unwrap_or_else(file_name) },
            OutputKind::FlamegraphHtml => {
                Output::FlamegraphHtml { title: self.title.clone().unwrap_or_else(file_name) }
            }
            OutputKind::Heatmap => Output::Heatmap {
                title: self.title.clone().unwrap_or_else(file_name),
                source_roots: self
                    .source_roots
                    .iter()
                    .map(|r| {
                        r.split_once('=')
                            .map(|(a, b)| (a.to_owned(), b.to_owned()))
                            .ok_or_else(|| RequestError::Usage(format!("--source-root {r}: give it as OLD=NEW")))
                    })
                    .collect::<Result<_, _>>()?,
            },
            OutputKind::Gecko => Output::Gecko,
            OutputKind::Speedscope => Output::Speedscope { name: file_name() },
            OutputKind::Pprof => Output::Pprof,
            OutputKind::Otlp | OutputKind::OtlpJson => {
                Output::Otlp { json: self.to == OutputKind::OtlpJson, service_name: self.service_name.clone() }
            }
            OutputKind::Tachyon => {
                Output::Tachyon { big_endian: self.byte_order.map(ByteOrder::is_big), compression: self.compression }
            }
            OutputKind::Gperftools => Output::Gperftools {
                word: self.word_size.map(|w| if w == 32 { RunTimeWord::Four } else { RunTimeWord::Eight }),
                big_endian: self.byte_order.map(ByteOrder::is_big),
            },
            OutputKind::Austin => Output::Austin,
            OutputKind::Mojo => Output::Mojo { version: self.mojo_version },
            OutputKind::Dot => Output::Dot,
            OutputKind::Callgrind => Output::Callgrind,
            OutputKind::Perfetto => Output::Perfetto,
        })
    }

    /// What `print_stats` is given for a pstats input.
    fn pstats_options(&self, file: &Path) -> PstatsOptions {
        PstatsOptions {
            print: crate::pstats::PrintOptions {
                sort: self.sort.as_deref().map(|s| s.split(',').map(str::to_string).collect()).unwrap_or_default(),
                restrictions: match self.limit {
                    Some(n) => vec![crate::pstats::Restriction::Count(i64::try_from(n).unwrap_or(i64::MAX))],
                    None => self.restrict.iter().map(|r| crate::pstats::Restriction::parse(r)).collect(),
                },
                strip_dirs: self.strip_dirs,
                callers: self.callers,
                callees: self.callees,
                files: vec![crate::pstats::ctime_line(file)],
            },
            keep_sampled_marker: self.keep_sampled_marker,
        }
    }
}

/// Why a requested conversion failed.
#[derive(Debug)]
pub enum RequestError {
    /// The options do not fit together or do not fit the input.
    Usage(String),
    /// The input could not be opened or read (names the file, format, offset and rule).
    Profile(ProfileError),
    /// A profile does not share the merged profiles' sample meaning (`tachyon merge`).
    Mismatch {
        /// The input file.
        file: PathBuf,
        /// How it differs.
        why: String,
    },
    /// The output cannot take this input, or could not be written.
    Convert {
        /// The input file.
        file: PathBuf,
        /// What failed.
        error: ConvertError<ProfileError>,
    },
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Usage(m) => f.write_str(m),
            RequestError::Profile(e) => write!(f, "{e}"),
            RequestError::Mismatch { file, why } => write!(f, "{}: {why}", file.display()),
            RequestError::Convert { error: ConvertError::Read(e), .. } => write!(f, "{e}"),
            RequestError::Convert { file, error: e @ (ConvertError::Unsupported { .. } | ConvertError::Encode(_)) } => {
                write!(f, "{}: {e}", file.display())
            }
            RequestError::Convert { error, .. } => write!(f, "{error}"),
        }
    }
}

impl std::error::Error for RequestError {}

/// What becomes of an input's tables once a conversion is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Teardown {
    /// Freed (a library caller, whose process goes on).
    Free,
    /// Left for the process's exit to reclaim: handing megabytes of tables back piece by
    /// piece costs more than some whole conversions, and a command ends right after.
    LeaveToExit,
}

/// Converts `file` as `request` asks into `dest`; returns the sample count. `warn` gets the
/// symboliser's warnings; `progress` is made once the input's expected sample count is known
/// and then told the samples done.
pub fn convert_file(
    file: &Path,
    request: &ConvertRequest,
    dest: Destination<'_>,
    teardown: Teardown,
    warn: &mut dyn FnMut(&str),
    progress: impl FnOnce(u64) -> Box<dyn FnMut(u64)>,
) -> Result<u64, RequestError> {
    let pstats_input = Profile::open(file).map_err(RequestError::Profile)?.kind() == FileKind::Marshal;
    let output = request.output(file, pstats_input)?;
    // A gperftools file re-encoded keeps its addresses: nothing to symbolise. Outputs made
    // of samples count pprof's samples unless told otherwise.
    let mut input = request.input.clone();
    input.no_symbolize |= request.to == OutputKind::Gperftools;
    input.counts_by_default = matches!(request.to, OutputKind::Gperftools | OutputKind::Tachyon);
    let options = input.source_options(request.pstats_options(file));
    with_source(file, &options, teardown, warn, progress, |source, progress| {
        crate::convert::convert(source, &output, dest, progress)
    })
}

/// A merge of many profiles as a user asks for it: the files (a folder stands for the files
/// in it), how they are folded, what is done with a file that cannot join, and the output.
#[derive(Debug, Clone)]
pub struct MergeRequest {
    /// The output and its options (as `convert` takes them).
    pub convert: ConvertRequest,
    /// Keep thread ids apart.
    pub threads: bool,
    /// Name and skip a file that cannot be read or does not share the others' sample
    /// meaning, instead of stopping.
    pub keep_going: bool,
    /// Threads reading files at once, this one among them; 0: one per core. Memory grows
    /// by about one file's fold per thread.
    pub jobs: usize,
}

/// What a merge did.
#[derive(Debug, Default)]
pub struct Merged {
    /// Profiles folded.
    pub profiles: u64,
    /// Samples the folded files replayed, each in its own unit.
    pub samples: u64,
    /// Files skipped, each with why (only with `keep_going`).
    pub skipped: Vec<RequestError>,
}

/// `paths` with every folder replaced by the files under it, in name order.
pub fn expand_folders(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in paths {
        expand(p, p.is_dir(), &mut files)?;
    }
    Ok(files)
}

/// [`expand_folders`] of one path, `is_dir` or not: a folder's entries are told apart by the
/// type the folder lists them with (a stat of each of thousands of files was a merge's
/// largest system time), a symbolic link by what it points to.
fn expand(path: &Path, is_dir: bool, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if !is_dir {
        files.push(path.to_owned());
        return Ok(());
    }
    let mut inside = Vec::new();
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let path = entry.path();
        let is_dir = kind.is_dir() || (kind.is_symlink() && path.is_dir());
        inside.push((path, is_dir));
    }
    inside.sort();
    for (path, is_dir) in inside {
        expand(&path, is_dir, files)?;
    }
    Ok(())
}

impl MergeRequest {
    /// The output, checked as `convert` checks it (`name` titles a flame graph or speedscope).
    pub fn output(&self, name: &Path) -> Result<Output, RequestError> {
        self.convert.output(name, false)
    }

    /// How each file is read: symbolised, pprof's sample counts (a merged sample is a sample).
    fn source_options(&self) -> SourceOptions {
        let mut input = self.convert.input.clone();
        input.counts_by_default = true;
        input.source_options(PstatsOptions::default())
    }

    /// Folds `files` into `fold`, each read into a part of its own and dropped before it is
    /// combined, in file order; `each` is told every file done (for progress). Without
    /// `keep_going` the first file that cannot join stops the merge. Files are read on
    /// [`jobs`](Self::jobs) threads at once (a part a thread waits to be combined at most):
    /// the result, the warnings, the files skipped and their order are those of one thread.
    pub fn fold_files(
        &self,
        files: &[PathBuf],
        output: &Output,
        fold: &mut Fold,
        warn: &mut dyn FnMut(&str),
        each: &mut dyn FnMut(&Path),
    ) -> Result<Merged, RequestError> {
        let threads = match self.jobs {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            jobs => jobs,
        };
        self.fold_files_on(threads, files, output, fold, warn, each)
    }

    /// [`Self::fold_files`] on at most `threads` threads.
    fn fold_files_on(
        &self,
        threads: usize,
        files: &[PathBuf],
        output: &Output,
        fold: &mut Fold,
        warn: &mut dyn FnMut(&str),
        each: &mut dyn FnMut(&Path),
    ) -> Result<Merged, RequestError> {
        let options = self.source_options();
        let mut merged = Merged::default();
        let threads = threads.min(files.len());
        if threads <= 1 {
            for file in files {
                let part = self.fold_file(file, &options, output, fold.part(), warn);
                self.join(fold, part, file, &mut merged)?;
                each(file);
            }
        } else {
            self.fold_side_by_side(files, &options, output, fold, threads, &mut merged, warn, each)?;
        }
        merged.profiles = fold.profiles();
        Ok(merged)
    }

    /// [`Self::fold_files`] on `threads` threads, this one among them: each takes the next
    /// file not taken; this one also combines the parts in file order as they become ready.
    /// At most `threads` files are taken and not yet combined, so memory holds that many
    /// parts however many files there are and however far a thread falls behind (a window
    /// of one or two more was no faster on 300 and 270 real profiles and held a part more
    /// at its peak, about 1.5 MB on deep stacks; measured) — and more while the files taken
    /// add up to at most [`SMALL_WINDOW_BYTES`], up to [`SMALL_WINDOW_FILES`] a thread: a
    /// window of two small files kept the reading thread waiting for every other one (3,000
    /// files of 4 KB: 0.28 s, and 0.23–0.24 s with 32; measured).
    #[allow(clippy::too_many_arguments)]
    fn fold_side_by_side(
        &self,
        files: &[PathBuf],
        options: &SourceOptions,
        output: &Output,
        fold: &mut Fold,
        threads: usize,
        merged: &mut Merged,
        warn: &mut dyn FnMut(&str),
        each: &mut dyn FnMut(&Path),
    ) -> Result<(), RequestError> {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        // A part read on a thread, with the warnings its file gave (told in file order), or
        // the panic that stopped its reading (raised again here rather than waited for).
        type Read = (usize, Vec<String>, Result<(Fold, u64), RequestError>);
        type Sent = Result<Read, Box<dyn std::any::Any + Send>>;
        let next = AtomicUsize::new(0);
        let combined = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        // Bytes of the files taken and not yet combined, and each file's, as taken.
        // (`usize`s: 32-bit PowerPC has no 64-bit atomics. Past the window's bytes one size is
        // as good as another, so each counts at most that much, and the sum of a window's
        // files cannot overflow.)
        let in_flight = AtomicUsize::new(0);
        let sizes: Vec<AtomicUsize> = files.iter().map(|_| AtomicUsize::new(0)).collect();
        // Each part is checked against the fold's facts as they were before this merge (the
        // parts of a merge are checked against each other when combined).
        let reference = fold.part();
        let take = || loop {
            let i = next.load(Ordering::Acquire);
            if i >= files.len() || stop.load(Ordering::Acquire) {
                return Take::Nothing;
            }
            if !in_window(i, combined.load(Ordering::Acquire), threads, in_flight.load(Ordering::Acquire)) {
                return Take::Wait;
            }
            if next.compare_exchange(i, i + 1, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                let size = std::fs::metadata(&files[i]).map_or(0, |m| m.len()).min(SMALL_WINDOW_BYTES as u64) as usize;
                sizes[i].store(size, Ordering::Release);
                in_flight.fetch_add(size, Ordering::AcqRel);
                return Take::File(i);
            }
        };
        // The part is a clone of `reference`, and its storage goes back to `reference`'s
        // spares when it is combined: each reading thread has its own, so memory is freed
        // and used again by the thread that allocated it (see `SpareParts::take`).
        let read = |i: usize, reference: &Fold| -> Read {
            let mut warnings = Vec::new();
            let part =
                self.fold_file(&files[i], options, output, reference.clone(), &mut |w| warnings.push(w.to_owned()));
            (i, warnings, part)
        };
        std::thread::scope(|scope| {
            // Never full: no more parts than the window exist at once.
            let (sender, ready) = std::sync::mpsc::channel::<Sent>();
            let workers: Vec<_> = (1..threads)
                .map(|_| {
                    let sender = sender.clone();
                    let (take, read) = (&take, &read);
                    let mine = reference.own_spares();
                    scope.spawn(move || loop {
                        match take() {
                            Take::File(i) => {
                                let part = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(i, &mine)));
                                // The receiver is gone once the merge has stopped.
                                if sender.send(part).is_err() {
                                    break;
                                }
                            }
                            // Woken when a part is combined or the merge stops.
                            Take::Wait => std::thread::park(),
                            Take::Nothing => break,
                        }
                    })
                })
                .collect();
            drop(sender);
            let wake = || workers.iter().for_each(|w| w.thread().unpark());
            let mut waiting: std::collections::BTreeMap<usize, (Vec<String>, _)> = std::collections::BTreeMap::new();
            let mut done = 0;
            let result = (|| {
                while done < files.len() {
                    if let Some((warnings, part)) = waiting.remove(&done) {
                        for w in &warnings {
                            warn(w.as_str());
                        }
                        self.join(fold, part, &files[done], merged)?;
                        each(&files[done]);
                        in_flight.fetch_sub(sizes[done].load(Ordering::Acquire), Ordering::AcqRel);
                        done += 1;
                        combined.store(done, Ordering::Release);
                        wake();
                        continue;
                    }
                    // Parts already sent come first: reading another file while the next
                    // in order waits in the channel left the reading threads waiting on
                    // this one (3,000 small files: 0.17 s, and 0.12 s taking them first).
                    let sent = match ready.try_recv() {
                        Ok(sent) => sent,
                        Err(_) => match take() {
                            Take::File(i) => Ok(read(i, &reference)),
                            // The next in order is being read elsewhere.
                            Take::Wait | Take::Nothing => match ready.recv() {
                                Ok(sent) => sent,
                                Err(_) => unreachable!("every reading thread ended with a file still to combine"),
                            },
                        },
                    };
                    let (i, warnings, part) = sent.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                    waiting.insert(i, (warnings, part));
                }
                Ok(())
            })();
            stop.store(true, Ordering::Release);
            wake();
            result
        })
    }

    /// Reads `file` into `part` (a [`Fold::part`]); its samples, or why it cannot join.
    fn fold_file(
        &self,
        file: &Path,
        options: &SourceOptions,
        output: &Output,
        mut part: Fold,
        warn: &mut dyn FnMut(&str),
    ) -> Result<(Fold, u64), RequestError> {
        let samples = with_source(
            file,
            options,
            Teardown::Free,
            warn,
            |_| Box::new(|_| {}),
            |source, progress| Ok(part.add_alone(source, output, progress)),
        )
        .and_then(|r| r.map_err(|e| mismatch_or_read(file, e)))?;
        Ok((part, samples))
    }

    /// Combines a file's part into `fold`, or skips the file (`keep_going`), or stops.
    fn join(
        &self,
        fold: &mut Fold,
        part: Result<(Fold, u64), RequestError>,
        file: &Path,
        merged: &mut Merged,
    ) -> Result<(), RequestError> {
        let added = part.and_then(|(part, samples)| {
            fold.combine(part).map(|()| samples).map_err(|why| mismatch_or_read(file, FoldError::Mismatch(why)))
        });
        match added {
            Ok(samples) => merged.samples = merged.samples.saturating_add(samples),
            Err(e) if self.keep_going => merged.skipped.push(e),
            Err(e) => return Err(e),
        }
        Ok(())
    }
}

/// Bytes of small files a merge on threads may have taken and not yet combined, beyond one
/// file a thread (a part is about ten to twenty times its file's size).
const SMALL_WINDOW_BYTES: usize = 256 << 10;

/// Files a thread may have taken and not yet combined while they are small.
const SMALL_WINDOW_FILES: usize = 32;

/// Whether a merge on `threads` threads may take file `i` while `combined` files are
/// combined and the files taken and not yet combined hold `in_flight` bytes: `threads`
/// files, and more while small.
fn in_window(i: usize, combined: usize, threads: usize, in_flight: usize) -> bool {
    i < combined + threads || (i < combined + threads * SMALL_WINDOW_FILES && in_flight < SMALL_WINDOW_BYTES)
}

/// What a thread merging side by side does next.
enum Take {
    /// Read this file.
    File(usize),
    /// Wait: as many files as the window holds are read and not yet combined.
    Wait,
    /// Stop: every file is taken, or the merge has stopped.
    Nothing,
}

/// A fold's refusal of `file` as the request says it.
fn mismatch_or_read(file: &Path, e: FoldError<ProfileError>) -> RequestError {
    match e {
        FoldError::Read(e) => RequestError::Profile(e),
        FoldError::Mismatch(why) => RequestError::Mismatch { file: file.to_owned(), why },
    }
}

/// Merges `files` as `request` asks and writes the result to `dest`.
pub fn merge_files(
    files: &[PathBuf],
    request: &MergeRequest,
    dest: Destination<'_>,
    name: &Path,
    warn: &mut dyn FnMut(&str),
    each: &mut dyn FnMut(&Path),
) -> Result<Merged, RequestError> {
    let output = request.output(name)?;
    let mut fold = Fold::new(FoldOptions { threads: request.threads });
    let merged = request.fold_files(files, &output, &mut fold, warn, each)?;
    let Some(mut folded) = fold.finish() else {
        return Err(RequestError::Usage("no profile could be merged".into()));
    };
    write_folded(&mut folded, &output, dest, name).map(|_| merged)
}

/// Writes a finished fold as `output` to `dest`; returns its sample count. `name` names the
/// output in errors.
pub fn write_folded(
    folded: &mut Folded,
    output: &Output,
    dest: Destination<'_>,
    name: &Path,
) -> Result<u64, RequestError> {
    crate::convert::convert(folded, output, dest, &mut |_| {})
        .map_err(|error| RequestError::Convert { file: name.to_owned(), error: error.map_read(|never| match never {}) })
}

/// Opens `file` as the source its content says it is and hands it to `run`.
pub fn with_source<T>(
    file: &Path,
    options: &SourceOptions,
    teardown: Teardown,
    warn: &mut dyn FnMut(&str),
    progress: impl FnOnce(u64) -> Box<dyn FnMut(u64)>,
    run: impl FnOnce(&mut AnySource<'_>, &mut dyn FnMut(u64)) -> Result<T, ConvertError<ProfileError>>,
) -> Result<T, RequestError> {
    let mut profile = Profile::open(file).map_err(RequestError::Profile)?;
    let mut source = profile.source(options).map_err(RequestError::Profile)?;
    for warning in source.warnings() {
        warn(warning);
    }
    let mut progress = progress(crate::model::Source::info(&source).expected_samples);
    let out =
        run(&mut source, &mut *progress).map_err(|error| RequestError::Convert { file: file.to_owned(), error })?;
    drop(progress);
    if teardown == Teardown::LeaveToExit {
        std::mem::forget(source);
        std::mem::forget(profile);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a merge did, as a user sees it: its numbers, what it skipped and said, the files
    /// it told done, and the merged profile's bytes.
    type Seen = (u64, u64, Vec<String>, Vec<String>, Vec<PathBuf>, Vec<u8>);

    fn merge_on(threads: usize, files: &[PathBuf], keep_going: bool) -> Result<Seen, String> {
        let request =
            MergeRequest { convert: ConvertRequest::new(OutputKind::Collapsed), threads: false, keep_going, jobs: 0 };
        let output = request.output(Path::new("merged")).unwrap();
        let mut fold = Fold::new(FoldOptions::default());
        let (mut warnings, mut told) = (Vec::new(), Vec::new());
        let merged = request
            .fold_files_on(threads, files, &output, &mut fold, &mut |w| warnings.push(w.to_owned()), &mut |f| {
                told.push(f.to_owned())
            })
            .map_err(|e| e.to_string())?;
        let mut folded = fold.finish().ok_or("nothing folded")?;
        let mut bytes = Vec::new();
        write_folded(&mut folded, &output, Destination::Stream(&mut bytes), Path::new("merged")).unwrap();
        let skipped = merged.skipped.iter().map(ToString::to_string).collect();
        Ok((merged.profiles, merged.samples, skipped, warnings, told, bytes))
    }

    #[test]
    fn folders_expand_to_their_files_sorted_following_links() {
        let root = std::env::temp_dir().join(format!("tachyon-expand-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["top/b", "top/a/inner", "elsewhere"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        for file in ["top/z.pb", "top/b/1.pb", "top/a/inner/2.pb", "top/a/0.pb", "elsewhere/3.pb", "lone.pb"] {
            std::fs::write(root.join(file), b"").unwrap();
        }
        std::os::unix::fs::symlink(root.join("elsewhere"), root.join("top/c")).unwrap();
        std::os::unix::fs::symlink(root.join("lone.pb"), root.join("top/d.pb")).unwrap();
        let files = expand_folders(&[root.join("top"), root.join("lone.pb")]).unwrap();
        let names: Vec<String> =
            files.iter().map(|f| f.strip_prefix(&root).unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(
            names,
            ["top/a/0.pb", "top/a/inner/2.pb", "top/b/1.pb", "top/c/3.pb", "top/d.pb", "top/z.pb", "lone.pb"]
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_window_holds_a_file_a_thread_and_more_only_while_small() {
        let (threads, combined) = (2, 10);
        for in_flight in [0, SMALL_WINDOW_BYTES, usize::MAX] {
            assert!(in_window(11, combined, threads, in_flight), "{in_flight} bytes");
            assert!(!in_window(10 + threads * SMALL_WINDOW_FILES, combined, threads, in_flight));
        }
        assert!(in_window(12, combined, threads, SMALL_WINDOW_BYTES - 1));
        assert!(!in_window(12, combined, threads, SMALL_WINDOW_BYTES));
        assert!(in_window(10 + threads * SMALL_WINDOW_FILES - 1, combined, threads, 0));
    }

    /// Files read side by side merge as on one thread: the same profile byte for byte, the
    /// same files skipped for the same reasons in the same order, the same progress; and
    /// without `keep_going`, the same first refusal.
    #[test]
    fn files_read_on_several_threads_merge_as_on_one() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let real = |name: &str| root.join("qemu-tests/fixtures/real-3.15.2").join(name);
        let scratch = std::env::temp_dir().join(format!("tachyon-merge-threads-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).unwrap();
        let cut = scratch.join("cut.pyb");
        let whole = std::fs::read(root.join("examples/stdlib_work.pyb")).unwrap();
        std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
        let files = vec![
            root.join("examples/stdlib_work.pyb"),
            real("threads_wall_zstd.pyb"),
            real("threads_cpu_raw.pyb"),
            real("recursion_deep_raw.pyb"),
            cut.clone(),
            real("mixed_wall_blocking_raw.pyb"),
            scratch.join("missing.pyb"),
            real("opcodes_native_zstd.pyb"),
            real("mixed_gil_raw.pyb"),
            root.join("examples/stdlib_work.pyb"),
        ];
        let alone = merge_on(1, &files, true).unwrap();
        assert_eq!((alone.0, alone.2.len(), alone.4.len()), (6, 4, files.len()), "{:?}", alone.2);
        for threads in [2, 3, 4, 16] {
            assert!(merge_on(threads, &files, true).unwrap() == alone, "{threads} threads, keep going");
        }
        // More files than the small files' window, so that threads wait for it to move.
        let many: Vec<PathBuf> = files.iter().cycle().take(2 * 2 * SMALL_WINDOW_FILES + 7).cloned().collect();
        let alone_many = merge_on(1, &many, true).unwrap();
        assert_eq!(alone_many.4.len(), many.len());
        assert!(merge_on(2, &many, true).unwrap() == alone_many, "2 threads, {} files", many.len());
        let first_refusal = merge_on(1, &files, false).unwrap_err();
        assert!(first_refusal.contains("threads_cpu_raw.pyb"), "{first_refusal}");
        for threads in [2, 3, 4, 16] {
            assert_eq!(merge_on(threads, &files, false).unwrap_err(), first_refusal, "{threads} threads");
        }
        std::fs::remove_dir_all(&scratch).unwrap();
    }
}
