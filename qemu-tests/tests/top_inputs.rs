//! `tachyon top` on the inputs CPython does not read — gperftools, MOJO, and a journaled
//! stream and a rotating writer's periods — each function's own and total samples as our
//! collapsed stacks of the same files give them (committed recordings: the same verdict on
//! every machine).

use std::path::Path;

use qemu_tests::recordings::committed;
use qemu_tests::top::{compare, from_collapsed, from_top};
use tachyon::convert::{convert, Destination, Output};
use tachyon::profile::{Profile, SourceOptions};

fn our_collapsed(path: &Path) -> String {
    let mut profile = Profile::open(path).unwrap();
    let options = SourceOptions { symbolize: Some(Vec::new()), ..SourceOptions::default() };
    let mut source = profile.source(&options).unwrap();
    let mut out = Vec::new();
    convert(&mut source, &Output::Collapsed, Destination::Stream(&mut out), &mut |_| {}).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn top_counts_equal_our_collapsed_stacks_of_every_other_input() {
    let files = [
        committed("gperftools-2.10/x86_64/workload.prof"),
        committed("gperftools-2.10/s390x/workload.prof"),
        committed("gperftools-2.10/x86_64/go-pprof.pb.gz"),
        committed("austin-3.7.0/threads.mojo"),
        committed("austin-4.0.0/a40-threads.mojo"),
        committed("austin-4.0.0/a40-children.mojo"),
    ];
    for file in &files {
        let theirs = from_collapsed(&our_collapsed(file));
        assert!(theirs.1 > 0, "{}: no samples", file.display());
        let ours = from_top(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        compare(&file.display().to_string(), &ours, &theirs).unwrap();
    }
}
