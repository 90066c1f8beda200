//! What the real gperftools readers printed, parsed: shared by the core codec's tests (which
//! include this file by path, having no dependency on this crate) and the conversion tests.

use std::collections::BTreeMap;

/// The machines `qemu-tests/oracle/gperftools/record.sh` records a profile on (folders of
/// `TACHYON_GPERFTOOLS_PROFILES`): x86_64 and i386 natively; s390x, powerpc and powerpc64
/// (all big-endian) under qemu-user.
#[allow(dead_code)] // The core codec's tests include this file and read only the parsers.
pub const RECORDED_ARCHES: [&str; 5] = ["x86_64", "i386", "s390x", "powerpc", "powerpc64"];

/// google-pprof's "Total: N samples" line.
pub fn perl_total(text: &str) -> u64 {
    let line = text.lines().find(|l| l.starts_with("Total: ")).expect("a Total line");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The samples of `go tool pprof -raw -symbolize=none`: address stack (innermost first) →
/// summed count.
pub fn go_samples(raw: &str) -> BTreeMap<Vec<u64>, u64> {
    let mut locations = BTreeMap::new();
    let mut in_locations = false;
    for line in raw.lines() {
        if line.starts_with("Locations") {
            in_locations = true;
            continue;
        }
        if line.starts_with("Mappings") {
            break;
        }
        if in_locations {
            let mut parts = line.split_whitespace();
            if let (Some(id), Some(addr)) = (parts.next(), parts.next()) {
                if let (Ok(id), Some(hex)) = (id.trim_end_matches(':').parse::<u64>(), addr.strip_prefix("0x")) {
                    locations.insert(id, u64::from_str_radix(hex, 16).unwrap());
                }
            }
        }
    }
    let mut samples = BTreeMap::new();
    for line in raw.lines().skip_while(|l| !l.starts_with("samples/count")).skip(1) {
        let Some((values, ids)) = line.split_once(':') else { break };
        let count: u64 = values.split_whitespace().next().unwrap().parse().unwrap();
        let stack = ids.split_whitespace().map(|id| locations[&id.parse::<u64>().unwrap()]).collect();
        *samples.entry(stack).or_insert(0) += count;
    }
    samples
}
