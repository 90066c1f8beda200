//! The `tachyon` command: arguments, progress bars, messages and exit codes, over the
//! library. What a command does with a file of any format is the library's
//! ([`crate::profile::Profile`], the conversion hub). The cargo-built binary and the Python
//! package's `tachyon` both call [`run`], so they are one command.
//!
//! Exit status: 0 on success, 1 on a bad or unreadable input (the message names the file,
//! the format, the byte offset and the rule broken), 2 on a usage error.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, IsTerminal, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::choice::Choice;
use crate::convert::{Destination, Output, OutputKind};
use crate::file::FileSink;
use crate::model::chain::Chain;
use crate::profile::{Profile, ProfileError, SourceOptions};
use crate::pstats::source::PstatsOptions;
use crate::push::follow::{follow, forget_refused, AfterSend, Event, FollowOptions};
use crate::push::{
    parse_header, push_file, Endpoint, Protocol, PushRequest, Retry, Secrets, TlsClient, Trust, UNANSWERED,
};
use crate::request::{
    convert_file, expand_folders, file_name, merge_files, with_source, ByteOrder, ConvertRequest, InputOptions,
    MergeRequest, RequestError, Teardown,
};
use crate::tachyon::input::{encode_stream, CapacityCount, InputError};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};
use tachyon_core::kind::FileKind;
use tachyon_core::{BigEndian, Compression, LittleEndian, NativeEndian};

#[derive(Parser)]
#[command(
    name = "tachyon",
    version,
    about = "Inspect, verify, dump, convert and merge sampling profiles: Tachyon (CPython 3.15's binary format), gperftools CPU profiles, pprof, Austin's MOJO and pstats"
)]
#[command(after_help = "Examples:
  tachyon info profile.bin
  tachyon info --json --records profile.bin
  tachyon verify profile.bin
  tachyon dump profile.bin > samples.jsonl
  tachyon encode input.json -o profile.bin --byte-order big --compression zstd
  tachyon convert profile.bin --to flamegraph -o flame.svg
  tachyon convert profile.bin --to collapsed -o stacks.txt
  tachyon convert profile.bin --to speedscope -o profile.speedscope.json
  tachyon convert profile.bin --to pprof -o profile.pb.gz && go tool pprof -top profile.pb.gz
  tachyon convert cpu.prof --to pprof -o cpu.pb.gz      (a gperftools CPU profile)
  tachyon convert profile.bin --to otlp --service-name checkout -o profile.otlp.pb
  tachyon diff before.bin after.bin -o diff.svg
  tachyon convert profile.bin --to pstats-text --sort cumtime --limit 30
  tachyon convert profile.bin --to pstats --pstats-compat -o profile.pstats
  tachyon convert profile.bin --to tachyon --byte-order big --compression zstd -o big.bin
  tachyon convert profile.out --to pstats-text --sort cumulative --limit 20   (a cProfile file)
  tachyon merge a.pstats b.pstats -o sum.pstats
  tachyon merge fleet/ --to pprof -o fleet.pb.gz --keep-going     (every profile under fleet/)
  tachyon push fleet/ --endpoint http://localhost:4318 --service-name checkout
  tachyon push cpu.prof --protocol pyroscope-pprof --endpoint http://localhost:4040 --service-name 'checkout{env=prod}'")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// No progress bars.
    #[arg(short, long, global = true)]
    quiet: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Header, counts, mode, features and stats of a profile.
    ///
    /// What CPython's get_info() says, and more; reads no sample data unless --records is
    /// given.
    Info {
        /// The profile.
        file: PathBuf,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Also decode the samples: count records of each kind and the raw region size.
        #[arg(long)]
        records: bool,
    },
    /// Full validation; exit status 1 with the first error.
    Verify {
        /// The profile.
        file: PathBuf,
    },
    /// One JSON line per sample, as the format's own reader returns it.
    ///
    /// Tachyon: a line per thread sample in file order, as CPython's reader returns them;
    /// MOJO: per metadata item and sample, as austin-python 2.4.0's reader yields them.
    Dump {
        /// The profile.
        file: PathBuf,
    },
    /// Writes a Tachyon profile from CPython writer input in JSON.
    ///
    /// The input is a JSON document (`samples` inside) or JSON lines (writer parameters on
    /// the first line, then one write_sample call per line).
    Encode {
        /// The writer input.
        input: PathBuf,
        /// The profile to write.
        #[arg(short, long)]
        output: PathBuf,
        /// Byte order of the file.
        #[arg(long, value_parser = choice::<ByteOrder>(), default_value_t = ByteOrder::Native)]
        byte_order: ByteOrder,
        /// Overrides the input's compression.
        #[arg(long, value_enum)]
        compression: Option<Zstd>,
    },
    /// A differential flame graph of two profiles.
    ///
    /// NEW's stacks (threads merged), coloured by how each frame's share changed from BASE
    /// (red grew, blue shrank). With --html, an interactive page with CPython's
    /// `replay --diff-flamegraph` numbers: NEW's tree, each frame's own samples against the
    /// baseline's, and a second view of the paths only the baseline has.
    Diff {
        /// The baseline profile.
        base: PathBuf,
        /// The profile to compare.
        new: PathBuf,
        /// The SVG (or with --html, the page) to write.
        #[arg(short, long)]
        output: PathBuf,
        /// Write an interactive HTML page instead of an SVG.
        #[arg(long)]
        html: bool,
        /// Title (default: "BASE → NEW").
        #[arg(long)]
        title: Option<String>,
        #[command(flatten)]
        inputs: InputArgs,
    },
    /// Puts a profile back together from a device's stream or a journal.
    ///
    /// From a capture of the framed stream a device sent over a link that cannot seek (a
    /// UART), or that a journaled writer wrote to a file; rebuilds a
    /// journaled stream cut at its tail (a killed process's) from the samples that arrived
    /// whole, saying what was cut; writes a device's sample stream (definitions once, samples
    /// by id) as the file its samples make, cut or not; refuses a capture with a frame lost
    /// or damaged elsewhere, and then writes no file. A Tachyon file (what a journaled run
    /// that finished leaves) is copied as it is.
    ///
    /// Given a rotating writer's prefix or folder (no -o), once its process has ended: makes
    /// every period there a profile in place — each stream (the killed period, or one killed
    /// in its hand-over) replaced by its file, rebuilt up to its last flush — and removes
    /// the .receiving files an interrupted hand-over left.
    Receive {
        /// The capture (the link's bytes), or a rotating writer's prefix or folder.
        input: PathBuf,
        /// The profile to write (for a capture).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// The functions the samples spend their time in: own and total samples of each.
    ///
    /// Own: samples whose innermost frame is the function; total: samples whose stack holds
    /// it. A function is a (file, line, name) as CPython's collectors count them (native
    /// profiles: the name); MOJO's counts are Austin's weights (µs or bytes). PATH is any profile, a framed
    /// stream (a journaled writer's live period, a device's capture), a MOJO file Austin is
    /// writing or a rotating writer's prefix or folder; streams and MOJO files are read as
    /// they grow, a refresh reading only what they gained. In a terminal, the
    /// table is redrawn every --interval seconds: q quits, o/t/n sort by own/total/name, Tab
    /// picks the next thread, a all threads, p pauses, f shows full paths, w the last --window
    /// seconds or the whole recording. --once (or output
    /// that is not a terminal) prints one table and exits.
    Top {
        /// The profile, stream, prefix or folder.
        path: PathBuf,
        /// Print the table once and exit (as when the output is not a terminal).
        #[arg(long)]
        once: bool,
        /// Seconds between refreshes of the live view.
        #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
        interval: f64,
        /// One JSON object: {"total", "threads", "functions": [{"function", "file", "line",
        /// "own", "total"}]}.
        #[arg(long)]
        json: bool,
        /// Order of the rows: own, total or name.
        #[arg(long, default_value = "own")]
        sort: crate::top::SortBy,
        /// Only the samples of this thread id.
        #[arg(long, value_name = "TID")]
        thread: Option<u64>,
        /// At most this many rows (text only).
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Count only the last SECONDS of sample time (the span ends at the newest sample;
        /// its start is rounded down to a tenth of it). In the live view, w switches
        /// between this span (10 s when not given) and the whole recording.
        #[arg(long, value_name = "SECONDS")]
        window: Option<f64>,
    },
    /// Names the native frames of a Tachyon profile from the binaries.
    ///
    /// Frames a runtime's writer recorded as `MODULE+0xADDRESS` (tachyon_modules_resolve,
    /// tachyon::native) become the functions the binary says they are in — static functions
    /// too, each inlined call a frame of its own, with file and line — from its ELF symbol
    /// table and DWARF, or its debugging file found by build id or .gnu_debuglink. A module
    /// not found, or found as another build, leaves its frames as they were. `convert` does
    /// the same for any output.
    Symbolize {
        /// The profile.
        input: PathBuf,
        /// The profile to write.
        #[arg(short, long)]
        output: PathBuf,
        /// Look for the binaries here first (repeatable): DIR/<their whole path>, then
        /// DIR/<their file name>; debugging files in DIR/.build-id/ too, before
        /// /usr/lib/debug.
        #[arg(long, value_name = "DIR")]
        binary_path: Vec<PathBuf>,
    },
    /// Folds many profiles into one (or adds pstats files together).
    ///
    /// With --to: folds any number of sample profiles of any formats (Tachyon, gperftools,
    /// pprof, MOJO; folders stand for the files in them) into one profile of stacks and
    /// counts, a file at a time, in memory that grows with distinct stacks and frames only.
    /// Without --to: adds pstats files together as `pstats.Stats(A, B, …)` does (without
    /// 3.15's sampled marker unless asked), or makes files of one sample format into one of
    /// that format with every sample of each, in the order given.
    Merge {
        /// The files (or folders of them).
        #[arg(required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        /// The file to write.
        #[arg(short, long)]
        output: PathBuf,
        /// Fold into this format (pprof, otlp, collapsed, tachyon, … any of convert's).
        #[arg(long, value_parser = choice::<OutputKind>())]
        to: Option<OutputKind>,
        /// With --to: name and skip files that cannot be read or do not share the first's
        /// sample meaning (its mode), instead of stopping.
        #[arg(long)]
        keep_going: bool,
        /// With --to: keep thread ids (stacks of different threads, and processes, apart).
        #[arg(long)]
        threads: bool,
        /// With --to: files read at once, each on a thread (memory grows by about a file's
        /// worth each). Default: one per core.
        #[arg(short, long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
        jobs: Option<u16>,
        /// With --to otlp or otlp-json: the resource's `service.name`.
        #[arg(long)]
        service_name: Option<String>,
        /// pstats: keep 3.15's ("__sampled__",) marker when the first file has it.
        #[arg(long)]
        keep_sampled_marker: bool,
        #[command(flatten)]
        inputs: InputArgs,
    },
    /// Sends profiles to an OTLP or Pyroscope server.
    ///
    /// Profiles (or folders of them) go one request per file: to an OTLP/HTTP receiver (POST <endpoint>/v1development/profiles, protobuf, gzip) or Pyroscope's
    /// /ingest (pprof or folded stacks). Retries with backoff on 429, 5xx and lost
    /// connections; stops at any other 4xx, or a certificate TLS refuses, with why.
    Push {
        /// The profiles (or folders of them).
        #[arg(required_unless_present = "follow", num_args = 1..)]
        files: Vec<PathBuf>,
        /// Run until killed, sending each complete profile that arrives in DIR once (a Tachyon
        /// file once its header is written, any other once unchanged for --settle-ms), in
        /// name order; a state file makes a restart send nothing twice but a file it logs as
        /// possibly sent twice. While the server does not take a file, waits and tries it
        /// again (--retry-wait-ms, doubled each time, at most a minute).
        #[arg(long, value_name = "DIR", conflicts_with_all = ["files", "keep_going"])]
        follow: Option<PathBuf>,
        /// --follow: the state file (default DIR/.tachyon-push-state).
        #[arg(long, value_name = "FILE")]
        state: Option<PathBuf>,
        /// --follow: what is done with a file the server took: keep (default), delete or
        /// move:DIR.
        #[arg(long, value_name = "keep|delete|move:DIR")]
        after_send: Option<String>,
        /// --follow: how long a file that is not Tachyon must stay unchanged to be complete, ms
        /// (default 2000).
        #[arg(long, value_name = "MS")]
        settle_ms: Option<u64>,
        /// --follow: how often the folder is looked at, ms (default 1000).
        #[arg(long, value_name = "MS")]
        poll_ms: Option<u64>,
        /// --follow: stop (exit 0) once nothing has been sent or waited for in SECONDS.
        #[arg(long, value_name = "SECONDS")]
        exit_after_idle: Option<f64>,
        /// --follow: try again the files the state records as refused (a 401 before the
        /// token was fixed …), once each.
        #[arg(long)]
        retry_refused: bool,
        /// Append what would go to stderr (files sent, retries, refusals, possible repeats,
        /// warnings), each line after its UTC time, to FILE instead; --quiet leaves out only
        /// the progress bar and the lines of files sent.
        #[arg(long, value_name = "FILE")]
        log: Option<PathBuf>,
        /// The server: http[s]://host[:port][/base].
        #[arg(long)]
        endpoint: String,
        /// https: trust only the certificate authorities in this PEM file (a private CA), as
        /// curl's --cacert; default: Mozilla's roots and the system's.
        /// OTEL_EXPORTER_OTLP_PROFILES_CERTIFICATE or OTEL_EXPORTER_OTLP_CERTIFICATE in the
        /// environment name one too.
        #[arg(long, value_name = "FILE")]
        cacert: Option<PathBuf>,
        /// What the server takes.
        #[arg(long, value_parser = choice::<Protocol>(), default_value_t = Protocol::Otlp)]
        protocol: Protocol,
        /// An extra header, `Name: value` (repeatable): `Authorization: Bearer TOKEN`,
        /// `X-Scope-OrgID: TENANT` …; `@FILE` reads one `Name: value` a line from FILE (for
        /// secrets: an argument shows in `ps`). OTEL_EXPORTER_OTLP_PROFILES_HEADERS or
        /// OTEL_EXPORTER_OTLP_HEADERS (`name=value,…`) in the environment add theirs.
        #[arg(short = 'H', long = "header", value_name = "NAME: VALUE|@FILE")]
        headers: Vec<String>,
        /// HTTP basic authentication, USER:PASSWORD (Grafana Cloud's instance id and token).
        #[arg(long, value_name = "USER:PASSWORD", conflicts_with = "basic_auth_file")]
        basic_auth: Option<String>,
        /// HTTP basic authentication from the first line of FILE, USER:PASSWORD.
        #[arg(long, value_name = "FILE")]
        basic_auth_file: Option<PathBuf>,
        /// OTLP: the resource's service.name; Pyroscope: the application name, labels
        /// included (`app{env=prod}`). Default: unknown_service.
        #[arg(long)]
        service_name: Option<String>,
        /// Most attempts per file.
        #[arg(long, default_value_t = 5)]
        attempts: u32,
        /// Wait before the first retry, ms (doubled for each further one, at most 60 s).
        #[arg(long, default_value_t = 500)]
        retry_wait_ms: u64,
        /// How long to wait for the server at each step, s.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
        /// Name a file that cannot be read, or that the server refuses, and go on.
        #[arg(long)]
        keep_going: bool,
        #[command(flatten)]
        inputs: InputArgs,
    },
    /// Converts a profile into another format (written to stdout without -o).
    Convert {
        /// The profile.
        file: PathBuf,
        #[command(flatten)]
        args: ConvertArgs,
        #[command(flatten)]
        inputs: InputArgs,
    },
}

/// How inputs are read: native addresses (gperftools profiles) named, pprof values chosen.
#[derive(Args, Clone, Default)]
struct InputArgs {
    /// pprof input: the sample value to count, by 0-based index or type name (`samples`,
    /// `cpu`, …); default: the profile's default type, else the last (as go pprof), except
    /// for --to tachyon and gperftools, which count the first type in `count` units.
    #[arg(long, value_name = "INDEX|NAME")]
    sample_index: Option<String>,
    /// Look for the profiled binaries here first (repeatable): DIR/<their whole path>, then
    /// DIR/<their file name>; then where the profile says they were.
    #[arg(long, value_name = "DIR")]
    binary_path: Vec<PathBuf>,
    /// Leave native addresses as `0x…` instead of reading the binaries' symbols.
    #[arg(long)]
    no_symbolize: bool,
    /// MOJO input: what a sample weighs in collapsed stacks, flame graphs, pprof and pstats;
    /// default: time, or allocations for a memory profile (as Austin's tools). speedscope gets
    /// every metric of the file's mode, as austin2speedscope makes it.
    #[arg(long, value_parser = choice::<crate::mojo::source::MojoMetric>(), value_name = "METRIC")]
    metric: Option<crate::mojo::source::MojoMetric>,
    /// Without `--sample-index`, count pprof's first `count` type (outputs made of samples).
    #[arg(skip)]
    counts_by_default: bool,
}

#[derive(Args)]
struct ConvertArgs {
    /// Output format.
    #[arg(long, value_parser = choice::<OutputKind>())]
    to: OutputKind,
    /// Output file.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// pstats: leave out 3.15's sampled-stats marker so that older Pythons load the file.
    #[arg(long)]
    pstats_compat: bool,
    /// pstats: from pstats input, keep 3.15's ("__sampled__",) marker (left out by default,
    /// so that every Python 3 loads the file).
    #[arg(long)]
    keep_sampled_marker: bool,
    /// pstats-text: row order. For a pstats input, what `Stats.sort_stats` takes (calls,
    /// ncalls, cumulative, cumtime, tottime, time, pcalls, name, nfl, stdname, filename,
    /// module, line and their unique prefixes; for a sampled file samples, nsamples,
    /// psamples, …), several comma-separated; without it, the file's order. For sample
    /// inputs, CPython replay's: nsamples (default), tottime, cumtime, sample-pct, cumul-pct,
    /// nsamples-cumul, name.
    #[arg(long)]
    sort: Option<String>,
    /// pstats-text: most rows (`print_stats(N)`; replay's default 15, all for pstats input).
    #[arg(short, long)]
    limit: Option<usize>,
    /// pstats-text (pstats input): `print_stats(*restrictions)`, in the order given: an
    /// integer keeps the first N rows, a float below 1 that fraction of them, anything else
    /// is a regular expression a row's `file:line(name)` must match (`re.search`). Repeatable.
    #[arg(long, value_name = "N|FRACTION|REGEX", conflicts_with = "limit")]
    restrict: Vec<String>,
    /// pstats-text: no summary of interesting functions (sample inputs).
    #[arg(long)]
    no_summary: bool,
    /// pstats-text (pstats input): `strip_dirs()` before sorting.
    #[arg(long)]
    strip_dirs: bool,
    /// pstats-text (pstats input): `print_callers` instead of `print_stats`.
    #[arg(long, conflicts_with = "callees")]
    callers: bool,
    /// pstats-text (pstats input): `print_callees` instead of `print_stats`.
    #[arg(long)]
    callees: bool,
    /// flamegraph, flamegraph-html, heatmap: title (default: the input's file name).
    #[arg(long)]
    title: Option<String>,
    /// heatmap: read the sources of files under OLD from NEW instead (the first that matches;
    /// repeatable), for a profile recorded where the sources had another path.
    #[arg(long, value_name = "OLD=NEW")]
    source_root: Vec<String>,
    /// tachyon, gperftools: byte order of the output (default: the input's).
    #[arg(long, value_parser = choice::<ByteOrder>())]
    byte_order: Option<ByteOrder>,
    /// tachyon: compression of the output (default: the input's).
    #[arg(long, value_enum)]
    compression: Option<Zstd>,
    /// gperftools: slot width of the output in bits (default: the input's; from pprof, this
    /// machine's unless an address needs 64 bits).
    #[arg(long, value_parser = ["32", "64"])]
    word_size: Option<String>,
    /// mojo: MOJO version of the output, 1 to 4 (default: a MOJO input's, else 3, as Austin
    /// writes).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=4))]
    mojo_version: Option<u8>,
    /// otlp, otlp-json: the resource's `service.name` (default: unknown_service).
    #[arg(long)]
    service_name: Option<String>,
}

/// clap's parser for one of the library's named values: its names, each with its
/// description as help (as clap's `ValueEnum` derive shows a variant's documentation).
fn choice<T: Choice + Send + Sync>() -> impl clap::builder::TypedValueParser<Value = T> {
    let values = T::ALL.iter().map(|(_, name, doc)| PossibleValue::new(*name).help(doc.trim().trim_end_matches('.')));
    PossibleValuesParser::new(values).try_map(|name| T::from_name(&name).ok_or("not one of the names"))
}

#[derive(Clone, Copy, ValueEnum)]
enum Zstd {
    None,
    Zstd,
}

impl From<Zstd> for Compression {
    fn from(z: Zstd) -> Compression {
        match z {
            Zstd::None => Compression::None,
            Zstd::Zstd => Compression::Zstd,
        }
    }
}

/// An error for the user: what, where.
struct Failure(String);

fn info(file: &Path, as_json: bool, records: bool, quiet: bool) -> Result<(), Failure> {
    let mut profile = Profile::open(file).map_err(failure)?;
    let mut progress = progress_for(&profile, quiet || !records);
    let v = profile.info(records, &mut |n| progress.update(n)).map_err(failure)?;
    print_facts(profile.kind(), v, as_json)?;
    // The command ends next: handing the tables back piece by piece would only cost time.
    std::mem::forget(profile);
    Ok(())
}

/// The detected format first, then the format's facts (sorted by name; `--json`: one object).
fn print_facts(kind: FileKind, mut v: Value, as_json: bool) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    let io_err = |e: io::Error| Failure(e.to_string());
    if as_json {
        v["format"] = json!(kind.name());
        return writeln!(out, "{v}").map_err(io_err);
    }
    writeln!(out, "{:>34}: {}", "format", kind.name()).map_err(io_err)?;
    if let Value::Object(map) = &v {
        for (k, val) in map {
            if NAMES.iter().any(|&(_, name)| name == k) {
                continue;
            }
            match NAMES.iter().find(|&&(number, _)| number == k).map(|&(_, name)| &v[name]) {
                Some(Value::String(name)) => writeln!(out, "{k:>34}: {name} ({val})"),
                Some(Value::Array(names)) => {
                    let names: Vec<&str> = names.iter().filter_map(Value::as_str).collect();
                    let names = if names.is_empty() { "none".to_string() } else { names.join(", ") };
                    writeln!(out, "{k:>34}: {names} ({val})")
                }
                _ => writeln!(out, "{k:>34}: {val}"),
            }
            .map_err(io_err)?;
        }
    }
    Ok(())
}

/// Facts given as a number and a name in the JSON, shown as `name (number)` in text.
const NAMES: [(&str, &str); 3] =
    [("compression_type", "compression"), ("mode", "mode_name"), ("capture_features", "capture_feature_names")];

fn verify(file: &Path, quiet: bool) -> Result<(), Failure> {
    let mut profile = Profile::open(file).map_err(failure)?;
    let mut progress = progress_for(&profile, quiet);
    let verified = profile.verify(&mut |n| progress.update(n)).map_err(failure)?;
    let details: String = verified.details.iter().map(|d| format!(", {d}")).collect();
    println!("{}: OK, {} {}{details} ({})", file.display(), verified.samples, verified.unit, profile.kind().title());
    std::mem::forget(profile);
    Ok(())
}

fn dump(file: &Path, quiet: bool) -> Result<(), Failure> {
    let mut profile = Profile::open(file).map_err(failure)?;
    let mut progress = progress_for(&profile, quiet);
    profile.dump(&mut io::stdout().lock(), &mut |n| progress.update(n)).map_err(failure)?;
    std::mem::forget(profile);
    Ok(())
}

/// The progress bar of a whole reading of `profile` (its total read only when it can show).
fn progress_for(profile: &Profile, quiet: bool) -> Progress {
    let shows = !quiet && io::stderr().is_terminal();
    Progress::new(if shows { profile.expected_samples() } else { 0 }, !shows)
}

/// A failure of the library's, as the user reads it: a journal's or a device's stream,
/// which no reader takes, is named with the command that makes it a profile.
fn failure(e: ProfileError) -> Failure {
    if let ProfileError::UnknownFormat { path } = &e {
        let mut start = Vec::with_capacity(STREAM_PROBE_BYTES);
        let read = File::open(path).and_then(|f| f.take(STREAM_PROBE_BYTES as u64).read_to_end(&mut start));
        if read.is_ok() && crate::tachyon::receive::is_stream(&start) {
            return Failure(format!(
                "{p}: a framed stream (a journaled writer's period not yet ended, or a device's capture), \
                 not a profile: `tachyon receive {p} -o OUT.pyb` makes one",
                p = path.display()
            ));
        }
    }
    Failure(e.to_string())
}

/// Bytes read to tell a stream: its first frame (a header record and framing) fits.
const STREAM_PROBE_BYTES: usize = 4096;

fn encode(input: &Path, output: &Path, order: ByteOrder, compression: Option<Zstd>) -> Result<(), Failure> {
    let at = |e: io::Error| Failure(format!("{}: {e}", input.display()));
    let bad = |e: InputError| Failure(format!("{}: {e}", input.display()));
    let open = || File::open(input).map(BufReader::new).map_err(at);
    let text_first = open()?.lines().next().transpose().map_err(at)?.unwrap_or_default();
    let first: Option<Value> = serde_json::from_str(&text_first).ok();
    let compression = compression.map(Compression::from);
    let sink = crate::file::create(output).map_err(|e| Failure(format!("{}: {e}", output.display())))?;
    // A document on one line parses as a whole; otherwise read the file as one document
    // unless its first line is a parameters object without samples (JSON lines).
    let sink = match first {
        Some(Value::Object(params)) if !params.contains_key("samples") => {
            // JSON lines: one pass counts what the calls can intern, a second streams them
            // into the writer, so no more than one call is held at a time.
            let params = Value::Object(params);
            let mut count = CapacityCount::default();
            for call in json_lines(open()?, input) {
                count.add_call(&call?);
            }
            let calls = json_lines(open()?, input).map(|c| c.map_err(|Failure(m)| InputError::Shape(m)));
            encode_in_order(sink, order, &params, count, compression, calls)
        }
        _ => {
            let mut doc: Value =
                serde_json::from_reader(open()?).map_err(|e| Failure(format!("{}: {e}", input.display())))?;
            let calls = match doc.get_mut("samples").map(Value::take) {
                Some(Value::Array(a)) => a,
                _ => return Err(Failure(format!("{}: no \"samples\" list", input.display()))),
            };
            let mut count = CapacityCount::default();
            calls.iter().for_each(|c| count.add_call(c));
            encode_in_order(sink, order, &doc, count, compression, calls.iter().map(Ok))
        }
    }
    .map_err(bad)?;
    sink.0.into_inner().map_err(|e| Failure(format!("{}: {}", output.display(), e.error())))?;
    Ok(())
}

/// The `write_sample` calls of a JSON-lines input: every non-blank line after the first.
fn json_lines<'p>(reader: BufReader<File>, input: &'p Path) -> impl Iterator<Item = Result<Value, Failure>> + 'p {
    reader.lines().enumerate().skip(1).filter_map(move |(n, line)| match line {
        Err(e) => Some(Err(Failure(format!("{}: {e}", input.display())))),
        Ok(l) if l.trim().is_empty() => None,
        Ok(l) => {
            Some(serde_json::from_str(&l).map_err(|e| Failure(format!("{}: line {}: {e}", input.display(), n + 1))))
        }
    })
}

fn encode_in_order<V: std::borrow::Borrow<Value>>(
    sink: FileSink,
    order: ByteOrder,
    params: &Value,
    count: CapacityCount,
    compression: Option<Compression>,
    calls: impl Iterator<Item = Result<V, InputError>>,
) -> Result<FileSink, InputError> {
    let cap = count.capacity();
    match order {
        ByteOrder::Native => encode_stream(sink, NativeEndian::default(), params, cap, compression, calls),
        ByteOrder::Little => encode_stream(sink, LittleEndian, params, cap, compression, calls),
        ByteOrder::Big => encode_stream(sink, BigEndian, params, cap, compression, calls),
    }
}

/// A progress bar on stderr that appears once work has taken a second, and never when
/// stderr is not a terminal or with --quiet.
struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    shown: bool,
}

impl Progress {
    /// A bar towards `total` samples, or a count when the total is unknown (0).
    fn new(total: u64, quiet: bool) -> Progress {
        Progress::counting(total, quiet, "samples")
    }

    /// A bar towards `total` files.
    fn files(total: u64, quiet: bool) -> Progress {
        Progress::counting(total, quiet, "files")
    }

    fn counting(total: u64, quiet: bool, what: &str) -> Progress {
        let bar = (!quiet && io::stderr().is_terminal()).then(|| {
            let (len, template) = match total {
                0 => (None, format!("{{human_pos}} {what}")),
                n => (Some(n), format!("{{bar:30}} {{percent:>3}}% {{human_pos}}/{{human_len}} {what}, {{eta}}")),
            };
            let bar = ProgressBar::with_draw_target(len, ProgressDrawTarget::hidden());
            bar.set_style(ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar()));
            bar
        });
        Progress { bar, started: Instant::now(), shown: false }
    }

    /// `done` samples so far (sources report about every 65,536 samples).
    fn update(&mut self, done: u64) {
        if let Some(bar) = &self.bar {
            if !self.shown && self.started.elapsed().as_secs_f64() >= 1.0 {
                bar.set_draw_target(ProgressDrawTarget::stderr());
                self.shown = true;
            }
            bar.set_position(done);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Options that belong to one output only ([`OutputKind::options`]) are usage errors with
/// another.
fn check_convert_args(to: OutputKind, given: &ArgMatches) -> Result<(), String> {
    for id in given.ids() {
        if given.value_source(id.as_str()) != Some(ValueSource::CommandLine) {
            continue;
        }
        let option = id.as_str().replace('_', "-");
        let owners: Vec<String> = OutputKind::owning(&option).map(|o| o.to_string()).collect();
        if !owners.is_empty() && !to.options().contains(&option.as_str()) {
            return Err(format!("--{option} only applies to --to {}", owners.join(" or --to ")));
        }
    }
    Ok(())
}

/// How the command reads an input, as the library takes it.
fn input_options(inputs: &InputArgs) -> InputOptions {
    InputOptions {
        sample_index: inputs.sample_index.clone(),
        binary_path: inputs.binary_path.clone(),
        no_symbolize: inputs.no_symbolize,
        metric: inputs.metric,
        counts_by_default: inputs.counts_by_default,
    }
}

/// A progress bar for a run of `total` samples, as the library's conversions take one.
fn progress_bar(quiet: bool) -> impl FnOnce(u64) -> Box<dyn FnMut(u64)> {
    move |total| {
        let mut bar = Progress::new(total, quiet);
        Box::new(move |n| bar.update(n))
    }
}

fn warn(w: &str) {
    eprintln!("tachyon: warning: {w}");
}

/// The library's request for what the command line asked.
fn request(a: &ConvertArgs, inputs: &InputArgs) -> ConvertRequest {
    ConvertRequest {
        to: a.to,
        pstats_compat: a.pstats_compat,
        keep_sampled_marker: a.keep_sampled_marker,
        sort: a.sort.clone(),
        limit: a.limit,
        restrict: a.restrict.clone(),
        no_summary: a.no_summary,
        strip_dirs: a.strip_dirs,
        callers: a.callers,
        callees: a.callees,
        title: a.title.clone(),
        source_roots: a.source_root.clone(),
        byte_order: a.byte_order,
        compression: a.compression.map(Compression::from),
        word_size: a.word_size.as_deref().and_then(|w| w.parse().ok()),
        mojo_version: a.mojo_version,
        service_name: a.service_name.clone(),
        input: input_options(inputs),
    }
}

fn convert(file: &Path, a: ConvertArgs, inputs: &InputArgs, quiet: bool) -> Result<(), Failure> {
    let mut stdout = io::stdout().lock();
    let dest = match &a.output {
        Some(p) => Destination::File(p),
        None => Destination::Stream(&mut stdout),
    };
    convert_file(file, &request(&a, inputs), dest, Teardown::LeaveToExit, &mut warn, progress_bar(quiet))
        .map(drop)
        .map_err(|e| Failure(e.to_string()))
}

/// `tachyon merge`: pstats files added as `pstats.Stats(first, *rest)` adds them; files of
/// one sample format (Tachyon, gperftools, pprof, MOJO) made into one of that format holding
/// every sample of each, in the order given.
fn merge(files: &[PathBuf], output: &Path, keep_marker: bool) -> Result<(), Failure> {
    let mut profiles = files.iter().map(|f| Profile::open(f).map_err(failure)).collect::<Result<Vec<_>, _>>()?;
    let kind = profiles[0].kind();
    for p in &profiles[1..] {
        if std::mem::discriminant(&p.kind()) != std::mem::discriminant(&kind) {
            return Err(Failure(format!(
                "{}: a {}; merge takes files of one format ({} first)",
                p.path().display(),
                p.kind().title(),
                kind.title()
            )));
        }
    }
    if kind == FileKind::Marshal {
        let loaded = profiles.iter().map(|p| p.pstats().map_err(failure)).collect::<Result<Vec<_>, _>>()?;
        let sum = crate::pstats::merge(&loaded);
        let mut out = Vec::new();
        crate::pstats::write(&sum, keep_marker, &mut out).map_err(|e| Failure(format!("encoding: {e}")))?;
        return std::fs::write(output, out).map_err(|e| Failure(format!("{}: {e}", output.display())));
    }
    if keep_marker {
        return Err(Failure("--keep-sampled-marker applies to pstats files".into()));
    }
    let out = match kind {
        FileKind::Tachyon => Output::Tachyon { big_endian: None, compression: None },
        FileKind::Gperftools => Output::Gperftools { word: None, big_endian: None },
        FileKind::Pprof { .. } => Output::Pprof,
        _ => Output::Mojo { version: None },
    };
    // Tachyon is written from the hub, which reads the samples twice (a census, then the
    // records); a gperftools profile keeps its addresses (as `--to gperftools` does).
    let options = SourceOptions {
        replayable: true,
        symbolize: (kind != FileKind::Gperftools).then(Vec::new),
        ..SourceOptions::default()
    };
    let parts = profiles.iter_mut().map(|p| p.source(&options).map_err(failure)).collect::<Result<Vec<_>, _>>()?;
    let mut chain = Chain::new(parts).ok_or_else(|| Failure("nothing to merge".into()))?;
    crate::convert::convert(&mut chain, &out, Destination::File(output), &mut |_| {})
        .map(drop)
        .map_err(|error| Failure(RequestError::Convert { file: files[0].clone(), error }.to_string()))
}

/// `tachyon merge --to`: every file folded into one profile (see [`crate::model::fold`]).
fn fold(files: &[PathBuf], output: &Path, request: &MergeRequest, quiet: bool) -> Result<(), Failure> {
    let files = expand_folders(files).map_err(|e| Failure(e.to_string()))?;
    let mut bar = Progress::files(files.len() as u64, quiet);
    let mut done = 0;
    let merged = merge_files(&files, request, Destination::File(output), output, &mut warn, &mut |_| {
        done += 1;
        bar.update(done);
    })
    .map_err(|e| Failure(e.to_string()))?;
    drop(bar);
    for skipped in &merged.skipped {
        eprintln!("tachyon: skipped {skipped}");
    }
    if !merged.skipped.is_empty() {
        eprintln!("tachyon: merged {} of {} files ({} skipped)", merged.profiles, files.len(), merged.skipped.len());
    }
    Ok(())
}

/// The TLS client an endpoint needs: for https://, trusting `--cacert`'s file, else the
/// OpenTelemetry exporters' certificate variable's, else Mozilla's roots and the system's.
fn push_tls(endpoint: &Endpoint, cacert: Option<PathBuf>) -> Result<Option<TlsClient>, String> {
    let from_env = || {
        ["OTEL_EXPORTER_OTLP_PROFILES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE"]
            .iter()
            .find_map(|v| std::env::var_os(v).filter(|p| !p.is_empty()))
            .map(PathBuf::from)
    };
    if !endpoint.tls {
        return match cacert {
            Some(_) => Err("--cacert is for https:// endpoints".into()),
            None => Ok(None),
        };
    }
    let trust = cacert.or_else(from_env).map_or(Trust::Default, Trust::CaFile);
    TlsClient::new(&trust).map(Some)
}

/// The headers of a push from every source (`-H`, `-H @FILE`, the OpenTelemetry variables,
/// basic authentication), each checked, each value registered as a secret.
fn push_headers(
    given: &[String],
    basic_auth: Option<String>,
    basic_auth_file: Option<PathBuf>,
    secrets: &mut Secrets,
) -> Result<Vec<(String, String)>, crate::push::secrets::BadHeader> {
    use crate::push::secrets::{basic_auth_from_file, headers_from_environment, headers_from_file};
    let mut headers = Vec::new();
    for h in given {
        match h.strip_prefix('@') {
            Some(path) => headers.extend(headers_from_file(Path::new(path))?),
            None => headers.push(parse_header(h)?),
        }
    }
    headers.extend(headers_from_environment()?);
    let credentials = match (basic_auth, basic_auth_file) {
        (Some(c), _) => Some(c),
        (None, Some(path)) => Some(basic_auth_from_file(&path)?),
        (None, None) => None,
    };
    if let Some(c) = credentials {
        secrets.add(&c);
        if let Some((_, password)) = c.split_once(':') {
            secrets.add(password);
        }
        headers.push(crate::push::basic_auth(&c));
    }
    secrets.add_headers(&headers);
    Ok(headers)
}

/// Where `tachyon push` says what happens: stderr, or a log file (each line after its UTC
/// time). Every line is scrubbed of the push's secrets before it gets here.
enum LogLines {
    Stderr,
    File(File),
}

impl LogLines {
    fn to_file(path: &Path) -> Result<LogLines, String> {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map(LogLines::File)
            .map_err(|e| format!("--log {}: {e}", path.display()))
    }

    /// `line` (without `tachyon: `), as one write: lines of one follower do not interleave.
    fn line(&mut self, line: &str) {
        match self {
            LogLines::Stderr => eprintln!("tachyon: {line}"),
            LogLines::File(f) => {
                let stamped = format!("{} tachyon: {line}\n", utc_now());
                // A log that cannot be written has nowhere to say so but stderr.
                if let Err(e) = f.write_all(stamped.as_bytes()) {
                    eprintln!("tachyon: the log: {e}; tachyon: {line}");
                }
            }
        }
    }
}

/// The time now, UTC, as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn utc_now() -> String {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let c = crate::civil::utc(i64::try_from(since.as_secs()).unwrap_or(i64::MAX));
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        c.year,
        c.month,
        c.day,
        c.hour,
        c.minute,
        c.second,
        since.subsec_millis()
    )
}

/// `tachyon push`: each file sent in turn, a bar over the files. Every line it prints is
/// scrubbed of the push's secrets (a server may echo the request's headers); retries and
/// warnings are said with or without --quiet.
fn push(
    files: &[PathBuf],
    request: &PushRequest,
    secrets: &Secrets,
    keep_going: bool,
    quiet: bool,
    log: &mut LogLines,
) -> Result<(), Failure> {
    let files = expand_folders(files).map_err(|e| Failure(e.to_string()))?;
    let mut bar = Progress::files(files.len() as u64, quiet);
    let mut failed = 0;
    let log = std::cell::RefCell::new(log);
    let say = |m: &str| log.borrow_mut().line(&secrets.scrub(m));
    let mut said = |m: &str| say(&format!("warning: {m}"));
    for (done, file) in files.iter().enumerate() {
        let mut waiting = |wait: Duration, why: &str| {
            say(&format!("warning: {}: {why}; trying again in {:.1} s", file.display(), wait.as_secs_f64()))
        };
        match push_file(file, request, &mut said, &mut waiting) {
            Ok(pushed) => {
                if pushed.possibly_twice {
                    said(&format!("{}: possibly sent twice: {UNANSWERED}", file.display()));
                }
                if let Some(partial) = pushed.partial {
                    said(&format!("{}: taken in part: {partial}", file.display()));
                }
            }
            Err(e) if keep_going => {
                failed += 1;
                say(&format!("skipped {}: {e}", file.display()));
            }
            Err(e) => return Err(Failure(secrets.scrub(&format!("{}: {e}", file.display())))),
        }
        bar.update(done as u64 + 1);
    }
    drop(bar);
    if failed > 0 {
        return Err(Failure(format!("pushed {} of {} files ({failed} skipped)", files.len() - failed, files.len())));
    }
    Ok(())
}

/// `push --follow`'s options from the command line.
fn follow_options(
    dir: &Path,
    state: Option<PathBuf>,
    after_send: Option<String>,
    settle_ms: Option<u64>,
    poll_ms: Option<u64>,
    retry_wait_ms: u64,
    exit_after_idle: Option<f64>,
) -> Result<FollowOptions, String> {
    let mut o = FollowOptions::new(dir);
    o.state = state.unwrap_or(o.state);
    if let Some(a) = after_send {
        o.after_send = AfterSend::parse(&a)?;
    }
    o.settle = settle_ms.map_or(o.settle, Duration::from_millis);
    o.poll = poll_ms.map_or(o.poll, |ms| Duration::from_millis(ms.max(1)));
    o.first_wait = Duration::from_millis(retry_wait_ms.max(1));
    o.exit_after_idle = match exit_after_idle {
        Some(s) if s.is_finite() && s >= 0.0 => Some(Duration::from_secs_f64(s.min(1e9))),
        Some(s) => return Err(format!("--exit-after-idle {s}: a number of seconds")),
        None => None,
    };
    Ok(o)
}

/// `push --follow`: runs until killed (or idle, if asked); every event to the log (stderr by
/// default), secrets blanked out; --quiet leaves out only the lines of files sent.
fn follow_dir(
    request: &PushRequest,
    options: &FollowOptions,
    secrets: &Secrets,
    quiet: bool,
    retry_refused: bool,
    log: &mut LogLines,
) -> Result<(), Failure> {
    if retry_refused {
        let n = forget_refused(&options.dir, &options.state).map_err(|e| Failure(e.to_string()))?;
        log.line(&format!("{n} files refused before will be tried again"));
    }
    let log = std::cell::RefCell::new(log);
    let mut on_event = |event: Event<'_>| {
        let line = match event {
            Event::Sent { file, partial: None } if !quiet => format!("sent {}", file.display()),
            Event::Sent { file, partial: Some(p) } => format!("warning: {}: taken in part: {p}", file.display()),
            Event::Sent { .. } => return,
            Event::PossiblySentTwice { file, why } => {
                format!("warning: {}: possibly sent twice: {why}", file.display())
            }
            Event::Refused { file, why } => format!("warning: {}: not sent: {why}", file.display()),
            Event::Waiting { file, why, wait } => {
                format!("warning: {}: {why}; trying again in {:.1} s", file.display(), wait.as_secs_f64())
            }
            Event::Warning(w) => format!("warning: {w}"),
        };
        log.borrow_mut().line(&secrets.scrub(&line));
    };
    let mut said = |m: &str| log.borrow_mut().line(&secrets.scrub(&format!("warning: {m}")));
    follow(request, options, &mut on_event, &mut said).map_err(|e| Failure(e.to_string()))
}

fn receive(input: &Path, output: Option<&Path>) -> Result<(), Failure> {
    let Some(output) = output else { return recover(input) };
    if input.is_dir() {
        return Err(Failure(format!("{}: a folder: its periods are recovered in place, without -o", input.display())));
    }
    let capture = std::fs::read(input).map_err(|e| Failure(format!("{}: {e}", input.display())))?;
    // A journaled run that finished cleanly left the file itself: the same command serves
    // both endings.
    if FileKind::detect(&capture) == FileKind::Tachyon {
        eprintln!(
            "tachyon receive: {}: already a Tachyon file (a journaled run that finished), copied",
            input.display()
        );
        return std::fs::write(output, capture).map_err(|e| Failure(format!("{}: {e}", output.display())));
    }
    let received =
        crate::tachyon::receive::receive(&capture).map_err(|e| Failure(format!("{}: {e}", input.display())))?;
    if let Some(salvage) = received.salvage {
        eprintln!("tachyon receive: {}: {salvage}", input.display());
    }
    std::fs::write(output, received.file).map_err(|e| Failure(format!("{}: {e}", output.display())))
}

/// `tachyon top --once`: one table of the functions' own and total samples.
fn top(
    path: &Path,
    json: bool,
    sort: crate::top::SortBy,
    thread: Option<u64>,
    limit: Option<usize>,
    span_us: Option<u64>,
) -> Result<(), Failure> {
    // As the live view's first refresh reads it: a stream in pieces, whatever its length.
    let mut follow = match span_us {
        Some(span) => crate::top::Follow::windowed(path, thread, span),
        None => crate::top::Follow::new(path, thread),
    };
    let counts = follow.refresh().map_err(|e| match e {
        crate::top::TopError::Profile(e) => failure(e),
        other => Failure(other.to_string()),
    })?;
    let span_us = counts.span_us();
    let counts = counts.recent().unwrap_or(counts);
    let text = if json {
        let mut value = counts.json(sort);
        if let Some(span) = span_us {
            value["window_us"] = span.into();
        }
        format!("{value}\n")
    } else {
        counts.text(sort, limit, None)
    };
    io::stdout().lock().write_all(text.as_bytes()).map_err(|e| Failure(format!("stdout: {e}")))
}

/// `tachyon symbolize`: a Tachyon profile written again with its native frames named.
fn symbolize(input: &Path, output: &Path, binary_path: Vec<PathBuf>) -> Result<(), Failure> {
    let mut profile = Profile::open(input).map_err(failure)?;
    if profile.kind() != FileKind::Tachyon {
        return Err(Failure(format!(
            "{}: a {}; symbolize writes Tachyon files again (convert names a gperftools or pprof profile's addresses)",
            input.display(),
            profile.kind().title()
        )));
    }
    // The hub's Tachyon writer reads the samples twice.
    let options = SourceOptions { replayable: true, symbolize: Some(binary_path), ..SourceOptions::default() };
    let mut source = profile.source(&options).map_err(failure)?;
    for w in source.warnings() {
        warn(w);
    }
    let counts = source.native_counts().unwrap_or_default();
    let out = Output::Tachyon { big_endian: None, compression: None };
    crate::convert::convert(&mut source, &out, Destination::File(output), &mut |_| {})
        .map_err(|error| Failure(RequestError::Convert { file: input.to_owned(), error }.to_string()))?;
    eprintln!(
        "tachyon symbolize: {}: {} native frames, {} named (as {} frames with their inlined calls), {} left as MODULE+0xADDRESS",
        input.display(),
        counts.native,
        counts.named,
        counts.frames,
        counts.native - counts.named
    );
    Ok(())
}

/// `tachyon receive PREFIX`: every period of a rotating run made a profile, in place.
fn recover(prefix: &Path) -> Result<(), Failure> {
    use crate::tachyon::receive::InPlace;
    use crate::tachyon::rotate::Recovery;
    if prefix.is_file() {
        return Err(Failure(format!(
            "{}: a file: give -o for the profile to write (without it, a rotating writer's prefix or folder)",
            prefix.display()
        )));
    }
    let done = crate::tachyon::rotate::recover(prefix).map_err(|e| Failure(format!("{}: {e}", prefix.display())))?;
    let periods = done.iter().filter(|r| matches!(r.outcome, Recovery::Period(_) | Recovery::EmptyRemoved)).count();
    if periods == 0 {
        return Err(Failure(format!("{}: no period files (PREFIX.SEQUENCE.START.pyb) there", prefix.display())));
    }
    let mut complete = 0;
    for r in &done {
        let what = match r.outcome {
            Recovery::LeftoverRemoved => {
                "removed (left by a hand-over that was cut; its stream is recovered)".to_owned()
            }
            Recovery::EmptyRemoved => "removed: killed before any of its profile reached it".to_owned(),
            Recovery::Period(InPlace::Received) => "a complete stream, now its profile".to_owned(),
            Recovery::Period(InPlace::Salvaged(s)) => format!("now a profile: {s}"),
            Recovery::Period(InPlace::Complete) => {
                complete += 1;
                continue;
            }
        };
        eprintln!("tachyon receive: {}: {what}", r.path.display());
    }
    eprintln!("tachyon receive: {}: {periods} period files, {complete} of them complete already", prefix.display());
    Ok(())
}

fn diff(
    base: &Path,
    new: &Path,
    output: &Path,
    html: bool,
    title: Option<String>,
    inputs: &InputArgs,
    quiet: bool,
) -> Result<(), Failure> {
    let options = input_options(inputs).source_options(PstatsOptions::default());
    if html {
        let tree = |file| {
            // A Tachyon header's mode and capture features (other formats have none).
            let config = crate::file::FileSource::open(file)
                .ok()
                .and_then(|mut f| tachyon_core::reader::Metadata::read(&mut f).ok())
                .map(|m| m.header.config);
            with_source(file, &options, Teardown::LeaveToExit, &mut warn, progress_bar(quiet), |s, p| {
                crate::html::diff::profiled(s, config, p)
            })
            .map_err(|e| Failure(e.to_string()))
        };
        let (base_tree, new_tree) = (tree(base)?, tree(new)?);
        let title = title.unwrap_or_else(|| format!("{} → {}", file_name(base), file_name(new)));
        let mut out = BufWriter::new(File::create(output).map_err(|e| Failure(format!("{}: {e}", output.display())))?);
        return crate::html::diff::write_diff(&base_tree, &new_tree, &title, &mut out)
            .map_err(|e| match e {
                crate::html::diff::DiffError::Write(e) => Failure(format!("{}: {e}", output.display())),
                e => Failure(format!("{} and {}: {e}", base.display(), new.display())),
            })
            .and_then(|()| out.flush().map_err(|e| Failure(format!("{}: {e}", output.display()))));
    }
    let lines = |file| {
        with_source(file, &options, Teardown::LeaveToExit, &mut warn, progress_bar(quiet), |s, p| {
            crate::convert::collapsed_lines(s, p)
        })
        .map_err(|e| Failure(e.to_string()))
    };
    let (base_lines, new_lines) = (lines(base)?, lines(new)?);
    let title = title.unwrap_or_else(|| format!("{} → {}", file_name(base), file_name(new)));
    let mut out = BufWriter::new(File::create(output).map_err(|e| Failure(format!("{}: {e}", output.display())))?);
    crate::convert::flamegraph::write_diff(&base_lines, &new_lines, &title, &mut out)
        .and_then(|()| out.flush())
        .map_err(|e| Failure(format!("{}: {e}", output.display())))
}

/// Runs the command on `args` (the program's name first, as `std::env::args_os` gives them)
/// and returns its exit status. Help and version go to standard output with status 0; a
/// usage error is told on standard error with status 2. Nothing exits the process: a host
/// such as the Python package gets the status back.
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let parsed = Cli::command().try_get_matches_from(args).and_then(|m| Cli::from_arg_matches(&m).map(|cli| (m, cli)));
    let (matches, cli) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            // clap's own exit prints the same way and then ends the process.
            let _ = e.print();
            let _ = io::stdout().flush();
            return u8::try_from(e.exit_code()).unwrap_or(2);
        }
    };
    let quiet = cli.quiet;
    let result = match cli.command {
        Command::Info { file, json, records } => info(&file, json, records, quiet),
        Command::Verify { file } => verify(&file, quiet),
        Command::Dump { file } => dump(&file, quiet),
        Command::Encode { input, output, byte_order, compression } => encode(&input, &output, byte_order, compression),
        Command::Convert { file, args, inputs } => {
            let given = matches.subcommand_matches("convert").unwrap_or(&matches);
            if let Err(msg) = check_convert_args(args.to, given) {
                eprintln!("tachyon: {msg}");
                return 2;
            }
            convert(&file, args, &inputs, quiet)
        }
        Command::Push {
            files,
            follow,
            state,
            after_send,
            settle_ms,
            poll_ms,
            exit_after_idle,
            retry_refused,
            log,
            endpoint,
            cacert,
            protocol,
            headers,
            basic_auth,
            basic_auth_file,
            service_name,
            attempts,
            retry_wait_ms,
            timeout,
            keep_going,
            inputs,
        } => {
            let mut secrets = Secrets::default();
            let request = Endpoint::parse(&endpoint).and_then(|endpoint| {
                let headers = push_headers(&headers, basic_auth, basic_auth_file, &mut secrets)
                    .map_err(|e| secrets.scrub(&e.to_string()))?;
                let tls = push_tls(&endpoint, cacert)?;
                Ok(PushRequest {
                    endpoint,
                    protocol,
                    headers,
                    service_name,
                    retry: Retry {
                        attempts,
                        first_wait: Duration::from_millis(retry_wait_ms),
                        timeout: Duration::from_secs(timeout),
                    },
                    input: input_options(&inputs),
                    tls,
                })
            });
            let follow_only = state.is_some()
                || after_send.is_some()
                || settle_ms.is_some()
                || poll_ms.is_some()
                || exit_after_idle.is_some()
                || retry_refused;
            if follow.is_none() && follow_only {
                eprintln!(
                    "tachyon: --state, --after-send, --settle-ms, --poll-ms, --exit-after-idle and --retry-refused \
                     go with --follow"
                );
                return 2;
            }
            let mut log = match log.map(|path| LogLines::to_file(&path)).transpose() {
                Ok(log) => log.unwrap_or(LogLines::Stderr),
                Err(msg) => {
                    eprintln!("tachyon: {msg}");
                    return 2;
                }
            };
            let follow = match follow
                .map(|dir| follow_options(&dir, state, after_send, settle_ms, poll_ms, retry_wait_ms, exit_after_idle))
                .transpose()
            {
                Ok(follow) => follow,
                Err(msg) => {
                    eprintln!("tachyon: {msg}");
                    return 2;
                }
            };
            let done = match (request, follow) {
                (Ok(request), Some(options)) => {
                    follow_dir(&request, &options, &secrets, quiet, retry_refused, &mut log)
                }
                (Ok(request), None) => push(&files, &request, &secrets, keep_going, quiet, &mut log),
                (Err(msg), _) => {
                    eprintln!("tachyon: {msg}");
                    return 2;
                }
            };
            // Why it stopped ends the log too (stderr has it below).
            if let (Err(Failure(why)), LogLines::File(_)) = (&done, &log) {
                log.line(why);
            }
            done
        }
        Command::Diff { base, new, output, html, title, inputs } => {
            diff(&base, &new, &output, html, title, &inputs, quiet)
        }
        Command::Receive { input, output } => receive(&input, output.as_deref()),
        Command::Symbolize { input, output, binary_path } => symbolize(&input, &output, binary_path),
        Command::Top { path, once, interval, json, sort, thread, limit, window } => {
            let span_us = match window {
                None => None,
                Some(s) if s.is_finite() && (1e-5..=1e7).contains(&s) => Some((s * 1e6) as u64),
                Some(s) => {
                    eprintln!("tachyon: --window {s}: seconds of sample time, from 0.00001 to 10000000");
                    return 2;
                }
            };
            if once || json || !io::stdout().is_terminal() {
                top(&path, json, sort, thread, limit, span_us)
            } else if !(interval.is_finite() && interval > 0.0 && interval <= 3600.0) {
                eprintln!("tachyon: --interval {interval}: seconds between refreshes, more than 0 and at most 3600");
                return 2;
            } else {
                let styled = std::env::var_os("NO_COLOR").map_or(true, |v| v.is_empty());
                let view = crate::top::screen::View {
                    sort,
                    thread,
                    full_paths: false,
                    paused: false,
                    styled,
                    span_us: span_us.unwrap_or(10_000_000),
                    windowed: span_us.is_some(),
                };
                crate::top::screen::run(&path, std::time::Duration::from_secs_f64(interval), view).map_err(
                    |e| match e {
                        crate::top::TopError::Profile(e) => failure(e),
                        other => Failure(other.to_string()),
                    },
                )
            }
        }
        Command::Merge {
            files,
            output,
            to: Some(to),
            keep_going,
            threads,
            jobs,
            service_name,
            keep_sampled_marker,
            inputs,
        } => {
            if keep_sampled_marker {
                eprintln!("tachyon: --keep-sampled-marker applies to merging pstats files (without --to)");
                return 2;
            }
            let mut convert = ConvertRequest::new(to);
            convert.service_name = service_name;
            convert.input = input_options(&inputs);
            let jobs = jobs.map_or(0, usize::from);
            fold(&files, &output, &MergeRequest { convert, threads, keep_going, jobs }, quiet)
        }
        Command::Merge {
            files,
            output,
            to: None,
            keep_going,
            threads,
            jobs,
            service_name,
            keep_sampled_marker,
            ..
        } => {
            if keep_going || threads || jobs.is_some() || service_name.is_some() {
                eprintln!("tachyon: --keep-going, --threads, --jobs and --service-name apply to merge --to");
                return 2;
            }
            if files.len() < 2 {
                eprintln!("tachyon: merge without --to takes at least two files");
                return 2;
            }
            merge(&files, &output, keep_sampled_marker)
        }
    };
    // A host process (Python) outlives the call: what the command printed leaves now, not
    // at an exit that std's runtime does not see.
    let _ = io::stdout().flush();
    match result {
        Ok(()) => 0,
        Err(Failure(msg)) => {
            eprintln!("tachyon: {msg}");
            1
        }
    }
}
