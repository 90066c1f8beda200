//! The last N seconds of sample time: counts kept per bucket of sample time (a tenth of the
//! span each), so that the most recent span's counts are the sum of its buckets, and buckets
//! older than the span are dropped as newer samples arrive: memory follows the span, not the
//! recording. The span ends at the newest sample seen (of any thread); it starts at a bucket
//! boundary, so it holds between N and 1.1 × N seconds.

use std::collections::{BTreeMap, HashMap};

/// Buckets per span.
const BUCKETS: u64 = 10;

/// Counts of the most recent span of sample time.
#[derive(Debug, Clone)]
pub(super) struct Recent {
    bucket_us: u64,
    /// Newest sample time seen, µs.
    latest_us: Option<u64>,
    /// Per bucket (sample time / `bucket_us`): samples, and (own, total) per function.
    buckets: BTreeMap<u64, Bucket>,
}

#[derive(Debug, Clone, Default)]
struct Bucket {
    samples: u64,
    counts: HashMap<u32, (u64, u64)>,
}

impl Recent {
    /// Counts of the last `span_us` µs (at least 10).
    pub(super) fn new(span_us: u64) -> Self {
        Recent { bucket_us: (span_us / BUCKETS).max(1), latest_us: None, buckets: BTreeMap::new() }
    }

    /// The span, µs.
    pub(super) fn span_us(&self) -> u64 {
        self.bucket_us * BUCKETS
    }

    /// The first bucket still in the span.
    fn first_bucket(&self) -> u64 {
        self.latest_us.map_or(0, |t| (t / self.bucket_us).saturating_sub(BUCKETS))
    }

    /// Adds the samples at `times` (µs) whose innermost function is `own` and whose stack
    /// holds each of `functions` once.
    pub(super) fn add(&mut self, times: &[u64], own: u32, functions: &[u32]) {
        let mut at = 0;
        while at < times.len() {
            let bucket = times[at] / self.bucket_us;
            let n = times[at..].iter().take_while(|&&t| t / self.bucket_us == bucket).count();
            let newest = times[at..at + n].iter().copied().max().unwrap_or(0);
            at += n;
            self.latest_us = Some(self.latest_us.map_or(newest, |t| t.max(newest)));
            if bucket < self.first_bucket() {
                continue;
            }
            let b = self.buckets.entry(bucket).or_default();
            let n = n as u64;
            b.samples += n;
            b.counts.entry(own).or_default().0 += n;
            for &f in functions {
                b.counts.entry(f).or_default().1 += n;
            }
        }
        let first = self.first_bucket();
        while self.buckets.first_key_value().is_some_and(|(&k, _)| k < first) {
            self.buckets.pop_first();
        }
    }

    /// Adds `other`'s buckets, its functions renamed by `rename`.
    pub(super) fn merge(&mut self, other: &Recent, rename: impl Fn(u32) -> u32) {
        if let Some(t) = other.latest_us {
            self.latest_us = Some(self.latest_us.map_or(t, |l| l.max(t)));
        }
        let first = self.first_bucket();
        for (&k, bucket) in other.buckets.range(first..) {
            let b = self.buckets.entry(k).or_default();
            b.samples += bucket.samples;
            for (&f, &(own, total)) in &bucket.counts {
                let c = b.counts.entry(rename(f)).or_default();
                c.0 += own;
                c.1 += total;
            }
        }
        while self.buckets.first_key_value().is_some_and(|(&k, _)| k < first) {
            self.buckets.pop_first();
        }
    }

    /// Drops the buckets that end before `other`'s span begins (a file whose samples are
    /// all older than the newest span of all the files keeps nothing).
    pub(super) fn drop_before(&mut self, other: &Recent) {
        let first = other.first_bucket() * other.bucket_us / self.bucket_us;
        while self.buckets.first_key_value().is_some_and(|(&k, _)| k < first) {
            self.buckets.pop_first();
        }
    }

    /// The span's samples and each function's (own, total).
    pub(super) fn sums(&self) -> (u64, HashMap<u32, (u64, u64)>) {
        let mut sums: HashMap<u32, (u64, u64)> = HashMap::new();
        let mut samples = 0;
        for bucket in self.buckets.range(self.first_bucket()..).map(|(_, b)| b) {
            samples += bucket.samples;
            for (&f, &(own, total)) in &bucket.counts {
                let c = sums.entry(f).or_default();
                c.0 += own;
                c.1 += total;
            }
        }
        (samples, sums)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples, and (function, (own, total)) in function order.
    type Sums = (u64, Vec<(u32, (u64, u64))>);

    fn sums(r: &Recent) -> Sums {
        let (samples, map) = r.sums();
        let mut v: Vec<_> = map.into_iter().collect();
        v.sort();
        (samples, v)
    }

    #[test]
    fn the_span_ends_at_the_newest_sample_and_starts_on_a_bucket() {
        // 10 s span, 1 s buckets. Function 1 at 0-5 s, function 2 (under 1) at 20.5 s.
        let mut r = Recent::new(10_000_000);
        r.add(&[0, 1_000_000, 5_999_999], 1, &[1]);
        assert_eq!(sums(&r), (3, vec![(1, (3, 3))]));
        r.add(&[20_500_000], 2, &[2, 1]);
        assert_eq!(sums(&r), (1, vec![(1, (0, 1)), (2, (1, 1))]));
        // Late samples of another thread still in the span (bucket 10 = 10.0-11.0 s) count;
        // older ones do not.
        r.add(&[10_000_000, 9_999_999], 1, &[1]);
        assert_eq!(sums(&r), (2, vec![(1, (1, 2)), (2, (1, 1))]));
        assert_eq!(r.buckets.len(), 2, "buckets before the span are dropped");
    }

    #[test]
    fn merged_spans_renamed_are_the_span_of_everything() {
        let mut a = Recent::new(1_000);
        a.add(&[0, 50, 999], 0, &[0]);
        let mut b = Recent::new(1_000);
        b.add(&[1_500, 1_600], 0, &[0, 1]);
        let mut all = Recent::new(1_000);
        all.merge(&a, |f| f + 5);
        all.merge(&b, |f| f + 5);
        // Span 1,000 µs ending at 1,600: buckets 600 µs on (100 µs each).
        assert_eq!(sums(&all), (3, vec![(5, (3, 3)), (6, (0, 2))]));
        // What of `a` precedes that span is dropped; what is in it stays.
        a.drop_before(&all);
        assert_eq!(a.buckets.keys().copied().collect::<Vec<_>>(), [9]);
    }
}
