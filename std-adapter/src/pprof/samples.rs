//! The samples of a `perftools.profiles.Profile` read where they lie in the message, one at a
//! time into reused buffers: prost makes three vectors per sample (its location ids, values
//! and labels), which was most of a merge of deep profiles.
//!
//! The wire format, as far as it is read here (protobuf's encoding; field numbers from
//! `profile.proto`):
//!
//! | where | field | number, wire type |
//! |---|---|---|
//! | `Profile` | `sample` | 2, length-delimited `Sample` (repeated) |
//! | `Sample` | `location_id` | 1, varint, or length-delimited packed varints (repeated) |
//! | `Sample` | `value` | 2, varint, or packed (repeated) |
//! | `Sample` | `label` | 3, length-delimited `Label` (repeated) |
//! | `Label` | `key`, `str`, `num`, `num_unit` | 1–4, varint (the last of each counts) |
//!
//! A field key is a varint `number << 3 | wire type`; a varint is at most ten bytes, the tenth
//! at most 1. Other fields are skipped by their wire type: varint, 8 bytes, length-delimited,
//! 4 bytes. Anything else — a group, a wrong wire type, a length past its message, a varint
//! that does not end — is [`Broken`]: the caller then asks prost, whose verdict (its error,
//! located by [`super::proto::malformed`], or a message after all) stands. So this reading
//! never takes a message prost refuses.

/// The message breaks a rule this reading keeps (see the module's docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Broken;

pub(super) const VARINT: u64 = 0;
const FIXED64: u64 = 1;
pub(super) const LENGTH: u64 = 2;
const FIXED32: u64 = 5;

/// The varint at `*at`, which moves past it.
#[inline(always)]
pub(super) fn varint(buf: &[u8], at: &mut usize) -> Result<u64, Broken> {
    // Most are one byte (location ids, small values): that case inline, the rest apart.
    match buf.get(*at) {
        Some(&byte) if byte < 0x80 => {
            *at += 1;
            Ok(u64::from(byte))
        }
        _ => varint_long(buf, at),
    }
}

#[inline(never)]
fn varint_long(buf: &[u8], at: &mut usize) -> Result<u64, Broken> {
    let mut value = 0u64;
    for i in 0..10 {
        let byte = *buf.get(*at).ok_or(Broken)?;
        *at += 1;
        if i == 9 && byte > 1 {
            return Err(Broken);
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            return Ok(value);
        }
    }
    Err(Broken)
}

/// A field's key at `*at`: (number, wire type).
#[inline]
pub(super) fn key(buf: &[u8], at: &mut usize) -> Result<(u64, u64), Broken> {
    let key = varint(buf, at)?;
    if key > u64::from(u32::MAX) || key >> 3 == 0 {
        return Err(Broken);
    }
    Ok((key >> 3, key & 7))
}

/// The bytes of a length-delimited value at `*at`, which moves past them.
#[inline]
pub(super) fn delimited<'a>(buf: &'a [u8], at: &mut usize) -> Result<&'a [u8], Broken> {
    let len = usize::try_from(varint(buf, at)?).map_err(|_| Broken)?;
    let end = at.checked_add(len).filter(|&end| end <= buf.len()).ok_or(Broken)?;
    let bytes = &buf[*at..end];
    *at = end;
    Ok(bytes)
}

/// Moves `*at` past a value of `wire` type.
#[inline]
pub(super) fn skip(buf: &[u8], at: &mut usize, wire: u64) -> Result<(), Broken> {
    let size = match wire {
        VARINT => return varint(buf, at).map(drop),
        LENGTH => return delimited(buf, at).map(drop),
        FIXED64 => 8,
        FIXED32 => 4,
        _ => return Err(Broken),
    };
    *at = at.checked_add(size).filter(|&end| end <= buf.len()).ok_or(Broken)?;
    Ok(())
}

/// The samples' messages in the order they come.
pub(super) fn bodies(raw: &[u8]) -> impl Iterator<Item = Result<&[u8], Broken>> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < raw.len() {
            let step = key(raw, &mut at).and_then(|(number, wire)| match (number, wire) {
                (2, LENGTH) => delimited(raw, &mut at).map(Some),
                (2, _) => Err(Broken),
                (_, wire) => skip(raw, &mut at, wire).map(|()| None),
            });
            match step {
                Ok(Some(body)) => return Some(Ok(body)),
                Ok(None) => {}
                Err(broken) => {
                    at = raw.len();
                    return Some(Err(broken));
                }
            }
        }
        None
    })
}

/// One sample, read into buffers kept from sample to sample.
#[derive(Debug, Default)]
pub(super) struct Sample {
    /// Location ids, leaf first, where the tests' [`Sample::read`] keeps them (the replay
    /// maps each as it is read and keeps none).
    #[cfg(test)]
    pub(super) locations: Vec<u64>,
    /// One per sample type.
    pub(super) values: Vec<i64>,
    /// Each label's `(key, num)`, in order.
    pub(super) labels: Vec<(i64, i64)>,
}

impl Sample {
    /// Reads the sample whose message is `body`, its location ids kept (what the tests compare
    /// with prost's decoding).
    #[cfg(test)]
    pub(super) fn read(&mut self, body: &[u8]) -> Result<(), Broken> {
        let mut locations = std::mem::take(&mut self.locations);
        locations.clear();
        let read = self.read_as(body, Some(&mut locations));
        self.locations = locations;
        read
    }

    /// Reads the sample's values and labels and hands its location ids to `each` as they
    /// come, keeping none (a replay maps them to frames at once).
    pub(super) fn read_each_location(&mut self, body: &[u8], each: &mut impl Locations) -> Result<(), Broken> {
        self.read_as(body, Some(each))
    }

    /// Reads the sample's values and labels and checks its location ids without keeping
    /// them (a first pass over the samples needs only the others).
    pub(super) fn read_without_locations(&mut self, body: &[u8]) -> Result<(), Broken> {
        self.read_as(body, None::<&mut Vec<u64>>)
    }

    #[inline(always)]
    fn read_as(&mut self, body: &[u8], mut locations: Option<&mut impl Locations>) -> Result<(), Broken> {
        self.values.clear();
        self.labels.clear();
        let mut at = 0;
        while at < body.len() {
            match key(body, &mut at)? {
                (1, VARINT) => {
                    let id = varint(body, &mut at)?;
                    if let Some(each) = &mut locations {
                        each.location(id);
                    }
                }
                (1, LENGTH) => {
                    let ids = delimited(body, &mut at)?;
                    match &mut locations {
                        Some(each) => each.packed(ids)?,
                        None => well_formed(ids)?,
                    }
                }
                (2, VARINT) => self.values.push(varint(body, &mut at)? as i64),
                (2, LENGTH) => packed(delimited(body, &mut at)?, |v| self.values.push(v as i64))?,
                (3, LENGTH) => self.labels.push(label(delimited(body, &mut at)?)?),
                (1..=3, _) => return Err(Broken),
                (_, wire) => skip(body, &mut at, wire)?,
            }
        }
        Ok(())
    }

    /// The `num` of the first label whose key is `key`.
    pub(super) fn label_num(&self, key: i64) -> Option<i64> {
        self.labels.iter().find(|(k, _)| *k == key).map(|&(_, num)| num)
    }
}

/// Where a sample's location ids go as [`Sample::read_each_location`] reads them.
pub(super) trait Locations {
    /// The next location id, innermost first.
    fn location(&mut self, id: u64);

    /// Packed location ids, each to [`location`](Locations::location) (a reader may map them
    /// its own way: see the pprof source's one-frame table).
    #[inline(always)]
    fn packed(&mut self, ids: &[u8]) -> Result<(), Broken> {
        each_packed(ids, self)
    }
}

/// Packed location ids, each to `locations` (what [`Locations::packed`] does unless a
/// reader does it its own way). A loop of its own rather than [`packed`] with a closure, the
/// one-byte ids (most: a profile's first 127 locations) taken without the position through
/// memory: the compiler had called the closure for every id of every stack.
#[inline(always)]
pub(super) fn each_packed(ids: &[u8], locations: &mut (impl Locations + ?Sized)) -> Result<(), Broken> {
    let mut rest = ids;
    while !rest.is_empty() {
        let id;
        (id, rest) = split_varint(rest)?;
        locations.location(id);
    }
    Ok(())
}

/// The varint `bytes` start with, and the bytes after it; `bytes` is not empty. The position
/// is the slice itself, not an index through memory: packed ids are read in loops that keep
/// everything in registers (the one-byte case inline, the rest apart).
#[inline(always)]
pub(super) fn split_varint(bytes: &[u8]) -> Result<(u64, &[u8]), Broken> {
    match bytes.split_first() {
        Some((&byte, rest)) if byte < 0x80 => Ok((u64::from(byte), rest)),
        _ => {
            let mut at = 0;
            let value = varint_long(bytes, &mut at)?;
            Ok((value, bytes.get(at..).ok_or(Broken)?))
        }
    }
}

/// Kept in order (the tests' reading; and the type a reading without locations names).
impl Locations for Vec<u64> {
    fn location(&mut self, id: u64) {
        self.push(id);
    }
}

/// Packed varints, each given to `each`.
#[inline(always)]
fn packed(bytes: &[u8], mut each: impl FnMut(u64)) -> Result<(), Broken> {
    let mut at = 0;
    while at < bytes.len() {
        each(varint(bytes, &mut at)?);
    }
    Ok(())
}

/// Whether `bytes` are whole packed varints, as [`packed`] would find them, without decoding
/// them: if the last byte ends a varint and no varint is longer than nine bytes, every one is
/// whole and within ten bytes. Only a run of nine continuation bytes or more (a tenth byte
/// whose value matters) is left to `packed`. (A first pass over deep stacks of location ids
/// past 127 spent most of its time decoding them.)
fn well_formed(bytes: &[u8]) -> Result<(), Broken> {
    // Every varint a byte (fewer than 128 locations): at once.
    if bytes.iter().all(|&b| b < 0x80) {
        return Ok(());
    }
    let (mut run, mut longest) = (0u32, 0u32);
    for &b in bytes {
        // The length of the run of continuation bytes ending here, without a branch.
        run = (run + 1) * u32::from(b >> 7);
        longest = longest.max(run);
    }
    match (run, longest) {
        (0, 0..=8) => Ok(()),
        (0, _) => packed(bytes, drop),
        _ => Err(Broken),
    }
}

/// A label's `(key, num)`.
fn label(body: &[u8]) -> Result<(i64, i64), Broken> {
    // What go and this project write for a numeric label: `key` of one byte, then `num` to
    // the end. Read at once (the general loop was 3% of a merge of small files, whose every
    // sample has a label; measured); anything else, by the loop.
    if let [0x08, key_index @ 0..=0x7f, 0x18, num @ .., last @ 0..=0x7f] = body {
        if num.len() < 9 && num.iter().all(|&b| b >= 0x80) {
            let value = num.iter().rev().fold(u64::from(*last), |v, &b| v << 7 | u64::from(b & 0x7f));
            return Ok((i64::from(*key_index), value as i64));
        }
    }
    let (mut key_index, mut num, mut at) = (0, 0, 0);
    while at < body.len() {
        match key(body, &mut at)? {
            (1, VARINT) => key_index = varint(body, &mut at)? as i64,
            (3, VARINT) => num = varint(body, &mut at)? as i64,
            (2 | 4, VARINT) => drop(varint(body, &mut at)?),
            (1..=4, _) => return Err(Broken),
            (_, wire) => skip(body, &mut at, wire)?,
        }
    }
    Ok((key_index, num))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pprof::proto::{Label, Profile, Sample as ProstSample};
    use prost::Message;

    fn profile(samples: Vec<ProstSample>) -> Vec<u8> {
        Profile { sample: samples, time_nanos: 7, string_table: vec![String::new(), "x".into()], ..Profile::default() }
            .encode_to_vec()
    }

    #[test]
    fn samples_read_in_place_are_what_prost_decodes() {
        let samples = vec![
            ProstSample { location_id: vec![1, 2, 300, u64::MAX], value: vec![5, -1, i64::MIN], label: vec![] },
            ProstSample {
                location_id: vec![],
                value: vec![0],
                label: vec![
                    Label { key: 1, str: 0, num: -3 },
                    Label { key: 9, str: 2, num: 1 << 40 },
                    Label { key: 1, str: 0, num: 4 },
                ],
            },
        ];
        let raw = profile(samples.clone());
        assert_eq!(bodies(&raw).count(), 2);
        let mut sample = Sample::default();
        for (body, want) in bodies(&raw).zip(&samples) {
            sample.read(body.unwrap()).unwrap();
            assert_eq!(sample.locations, want.location_id);
            assert_eq!(sample.values, want.value);
            let labels: Vec<(i64, i64)> = want.label.iter().map(|l| (l.key, l.num)).collect();
            assert_eq!(sample.labels, labels);
        }
        sample.read(&profile_sample_body(&samples[1])).unwrap();
        assert_eq!(sample.label_num(1), Some(-3), "the first label of the key");
        assert_eq!(sample.label_num(2), None);
    }

    fn profile_sample_body(s: &ProstSample) -> Vec<u8> {
        s.encode_to_vec()
    }

    #[test]
    fn unpacked_repeated_fields_and_unknown_fields_read_as_prost_reads_them() {
        // location_id 1 unpacked twice, value 2 packed [3, 4], an unknown fixed32 field 9, a
        // label with an unknown length-delimited field 7, then value 2 unpacked 5.
        let body = [
            0x08, 0x01, 0x08, 0x02, 0x12, 0x02, 0x03, 0x04, 0x4d, 1, 2, 3, 4, 0x1a, 0x05, 0x08, 0x05, 0x3a, 0x01, 0xff,
            0x10, 0x05,
        ];
        let want = ProstSample::decode(&body[..]).unwrap();
        let mut sample = Sample::default();
        sample.read(&body).unwrap();
        assert_eq!((sample.locations.as_slice(), sample.values.as_slice()), (&[1, 2][..], &[3, 4, 5][..]));
        assert_eq!(want.location_id, [1, 2]);
        assert_eq!(want.value, [3, 4, 5]);
        assert_eq!(sample.labels, [(5, 0)]);
        assert_eq!((want.label[0].key, want.label[0].num), (5, 0));
    }

    #[test]
    fn packed_location_ids_are_checked_as_prost_checks_them_when_they_are_not_kept() {
        // Packed location ids around each edge of the unkept reading's shortcut: varints of
        // one to eleven bytes, a tenth byte of 1 (whole) and of 2 (past 64 bits), a last
        // varint that does not end, and runs of nine continuation bytes among good ids.
        let varint = |len: usize, last: u8| {
            let mut v = vec![0x80u8; len - 1];
            v.push(last);
            v
        };
        let mut cases: Vec<Vec<u8>> = (1..=11).map(|len| varint(len, 0x01)).collect();
        cases.push(varint(10, 0x02));
        cases.push(varint(10, 0x7f));
        cases.push(vec![0x05, 0x80, 0x80]);
        cases.push([vec![0x05], varint(9, 0x03), vec![0x96, 0x01]].concat());
        cases.push([vec![0x05], varint(10, 0x01), vec![0x96, 0x01]].concat());
        cases.push([vec![0x05], varint(10, 0x03), vec![0x96, 0x01]].concat());
        cases.push([vec![0x96, 0x01], varint(12, 0x00)].concat());
        let mut sample = Sample::default();
        for ids in cases {
            let body = [vec![0x0a, ids.len() as u8], ids.clone()].concat();
            let prost = ProstSample::decode(&body[..]);
            assert_eq!(sample.read_without_locations(&body).is_ok(), prost.is_ok(), "ids {ids:02x?}");
            assert_eq!(sample.read(&body).is_ok(), prost.is_ok(), "ids {ids:02x?}, kept");
        }
    }

    /// Labels around the edges of the one-shape reading (a one-byte key, then `num` to the
    /// end in fewer than ten bytes) read as prost reads them, or are refused as it refuses them.
    #[test]
    fn labels_read_as_prost_reads_them() {
        let mut bodies: Vec<Vec<u8>> = Vec::new();
        for key in [0, 5, 127, 128] {
            for num in [0, 1, 127, 128, 26_401, 1 << 35, (1 << 56) - 1, 1 << 56, 1 << 62, i64::MAX, -1, i64::MIN] {
                bodies.push(Label { key, str: 0, num }.encode_to_vec());
            }
        }
        bodies.push(Label { key: 5, str: 3, num: 7 }.encode_to_vec());
        bodies.extend([
            vec![0x08, 0x05, 0x18, 0x80, 0x80, 0x00], // a num with padding bytes
            vec![0x08, 0x05, 0x18, 0x81],             // a num that does not end
            vec![0x08, 0x05, 0x18, 0x05, 0x18, 0x06], // num twice: the last counts
            vec![0x08, 0x05, 0x18, 0x05, 0x08, 0x06], // key twice
            vec![0x08, 0x05, 0x18, 0x05, 0x20, 0x06], // a num_unit after
            [vec![0x08, 0x05, 0x18], vec![0xff; 8], vec![0x7f]].concat(), // nine bytes
            [vec![0x08, 0x05, 0x18], vec![0xff; 9], vec![0x01]].concat(), // ten
            [vec![0x08, 0x05, 0x18], vec![0xff; 9], vec![0x02]].concat(), // past 64 bits
            vec![0x08, 0x05, 0x1a, 0x01, 0x00],       // num length-delimited
        ]);
        for body in bodies {
            let want = Label::decode(&body[..]).map(|l| (l.key, l.num)).ok();
            assert_eq!(label(&body).ok(), want, "{body:02x?}");
        }
    }

    #[test]
    fn what_prost_refuses_is_broken_here() {
        let cases: [&[u8]; 7] = [
            &[0x08],                                                             // a varint that does not end
            &[0x12, 0x03, 0x01],                                                 // packed values past the message
            &[0x12, 0x01, 0x80],                                                 // a packed varint that does not end
            &[0x0a, 0x02, 0x05, 0x80], // a packed location id that does not end
            &[0x0d, 0, 0, 0, 0],       // location_id as fixed32
            &[0x1a, 0x02, 0x0a, 0x00], // a label's key as length-delimited
            &[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02], // an eleven-bit tenth byte
        ];
        let mut sample = Sample::default();
        for body in cases {
            assert!(ProstSample::decode(body).is_err(), "prost takes {body:?}");
            assert_eq!(sample.read(body), Err(Broken), "{body:?}");
            assert_eq!(sample.read_without_locations(body), Err(Broken), "{body:?}, locations unkept");
        }
        // At the top: a sample as a varint, a sample longer than the message.
        for raw in [&[0x10, 0x01][..], &[0x12, 0x05, 0x08]] {
            assert!(Profile::decode(raw).is_err());
            assert_eq!(super::super::tables::Tables::read(raw), Err(Broken));
            assert_eq!(bodies(raw).next(), Some(Err(Broken)));
        }
    }
}
