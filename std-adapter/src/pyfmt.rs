//! Python-compatible formatting, in one place: what CPython's tools print of a string, a
//! float, an int, and `json.dumps`' strings. Outputs compared byte for byte with CPython's
//! (`replay`'s table, collapsed stacks, jsonl, pstats' table, gprof2dot, Austin's tools) take
//! their numbers and names from here.
//!
//! Ints are written without the formatting machinery: a large table or a collapsed file
//! prints hundreds of thousands, and the machinery costs more than the digits.

use std::fmt::Write as _;
use std::io;

/// The decimal digits of `v`, written at the end of `buf`.
#[inline]
pub fn decimal_digits(mut v: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &buf[i..]
}

/// Appends `v` in decimal.
#[inline]
pub fn push_decimal(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; 20];
    out.extend_from_slice(decimal_digits(v, &mut buf));
}

/// Appends `v` in decimal, with its sign.
pub fn push_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    push_decimal(out, v.unsigned_abs());
}

/// Python's `repr(float)`: the shortest digits that read back, in exponent form below 1e-4
/// or from 1e16.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    // Rust's `{:e}` gives the shortest round-trip digits: d.ddddde±x.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if negative { "-" } else { "" };
    if !(-4..16).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() { String::new() } else { format!(".{rest}") };
        return format!("{sign}{first}{frac}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
    let point = exp + 1; // digits before the decimal point
    if point <= 0 {
        format!("{sign}0.{}{digits}", "0".repeat((-point) as usize))
    } else if point as usize >= digits.len() {
        format!("{sign}{digits}{}.0", "0".repeat(point as usize - digits.len()))
    } else {
        let (int, frac) = digits.split_at(point as usize);
        format!("{sign}{int}.{frac}")
    }
}

/// Python's `repr()` of a string: single quotes unless the text has `'` and no `"`,
/// backslash escapes for the quote, `\\`, `\t` `\n` `\r` and other control characters.
/// Non-ASCII characters are kept (Python escapes the non-printable ones among them too;
/// that only changes the order of names holding such characters).
pub fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (0x80..0xa0).contains(&(c as u32)) => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// `pstats.f8`: `"%8.3f" % x`.
pub fn f8(x: f64) -> String {
    let mut s = String::with_capacity(8);
    f8_into(&mut s, x);
    s
}

/// `"%8.3f" % x`, appended to `out`.
pub fn f8_into(out: &mut String, x: f64) {
    // Most times of a large profile are below half a millisecond: they all print as 0.000
    // (the double nearest 0.0005 is above it, so anything below that double is below
    // 0.0005 itself and rounds down), sign kept as `%f` keeps it.
    if x.abs() < 0.0005 {
        out.push_str(if x.is_sign_negative() { "  -0.000" } else { "   0.000" });
    } else if let Some(thousandths) = round_thousandths(x.abs()) {
        // `%8.3f` of a value whose rounding the product decides (below).
        let mut digits = String::with_capacity(24);
        if x < 0.0 {
            digits.push('-');
        }
        push_int(&mut digits, (thousandths / 1000) as i64);
        digits.push('.');
        let frac = thousandths % 1000;
        digits.extend(
            [b'0' + (frac / 100) as u8, b'0' + (frac / 10 % 10) as u8, b'0' + (frac % 10) as u8].map(char::from),
        );
        for _ in digits.len()..8 {
            out.push(' ');
        }
        out.push_str(&digits);
    } else if x.is_finite() {
        let _ = write!(out, "{x:8.3}");
    } else {
        let _ = write!(out, "{:>8}", float_repr(x));
    }
}

/// `x` (positive, finite) to the nearest thousandth, in thousandths, where `x * 1000.0`
/// decides it: that product is within 2^-13 of the exact one below 2^40, so a fraction more
/// than 2^-10 from one half rounds as the exact value does. `None` near a tie or for large
/// values, which the exact formatter takes.
fn round_thousandths(x: f64) -> Option<u64> {
    let y = x * 1000.0;
    // (NaN fails the comparison too.)
    if y.partial_cmp(&((1u64 << 40) as f64)) != Some(std::cmp::Ordering::Less) {
        return None;
    }
    let whole = y.floor();
    let frac = y - whole;
    if (frac - 0.5).abs() <= 1.0 / 1024.0 {
        return None;
    }
    Some(whole as u64 + u64::from(frac > 0.5))
}

/// `i` in decimal, appended to `out` (without the formatting machinery: a large table
/// prints hundreds of thousands).
pub fn push_int(out: &mut String, i: i64) {
    if i < 0 {
        out.push('-');
    }
    let mut buf = [0u8; 20];
    // Only ASCII digits are written.
    out.extend(decimal_digits(i.unsigned_abs(), &mut buf).iter().map(|&b| char::from(b)));
}

/// Writes `text` as Python's `json.dumps` does by default (`ensure_ascii`): printable ASCII
/// as is, `"` `\\` and the usual control characters as short escapes, everything else as
/// lowercase `\\uXXXX` (UTF-16 surrogate pairs beyond the BMP).
pub fn write_json_str(out: &mut impl io::Write, text: &str) -> io::Result<()> {
    out.write_all(b"\"")?;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        let short: Option<&[u8]> = match c {
            '"' => Some(b"\\\""),
            '\\' => Some(b"\\\\"),
            '\n' => Some(b"\\n"),
            '\r' => Some(b"\\r"),
            '\t' => Some(b"\\t"),
            '\u{8}' => Some(b"\\b"),
            '\u{c}' => Some(b"\\f"),
            ' '..='~' => continue,
            _ => None,
        };
        out.write_all(&text.as_bytes()[start..i])?;
        start = i + c.len_utf8();
        match short {
            Some(s) => out.write_all(s)?,
            None => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    write!(out, "\\u{u:04x}")?;
                }
            }
        }
    }
    out.write_all(&text.as_bytes()[start..])?;
    out.write_all(b"\"")
}

#[cfg(test)]
mod tests {
    use super::{f8, push_int, write_json_str};

    fn py(s: &str) -> String {
        let mut v = Vec::new();
        write_json_str(&mut v, s).unwrap();
        String::from_utf8(v).unwrap()
    }

    /// Expected strings are what Python's `json.dumps` printed for the same input.
    #[test]
    fn escapes_like_python_json_dumps() {
        assert_eq!(py("plain /x.py"), r#""plain /x.py""#);
        assert_eq!(py("q\"b\\n\nr\rt\tb\u{8}f\u{c}"), r#""q\"b\\n\nr\rt\tb\bf\f""#);
        assert_eq!(py("\u{1}\u{7f}é€\u{fffd}"), r#""\u0001\u007f\u00e9\u20ac\ufffd""#);
        assert_eq!(py("日\u{1f600}"), r#""\u65e5\ud83d\ude00""#);
    }

    /// `%8.3f` is printed as Rust's exact formatter prints `{:8.3}` (correctly rounded, ties
    /// to even on the exact binary value, as C's printf and so Python's `%` do), whichever
    /// path a value takes.
    #[test]
    fn times_print_as_the_exact_formatter_prints_them() {
        let mut values = vec![0.0, 0.0004999, 0.0005, 0.0015, 0.0025, 0.9995, 2.5, 1e9, 1.0995e9, 1.2e9, 1e300];
        let (up, down) = (|x: f64| f64::from_bits(x.to_bits() + 1), |x: f64| f64::from_bits(x.to_bits() - 1));
        // Halfway between thousandths, and the doubles on either side: where the product can
        // round the wrong way.
        for k in (0..200_000u64).chain((1u64 << 40) - 2_000..(1u64 << 40) + 2_000) {
            let tie = (k as f64 + 0.5) / 1000.0;
            values.extend([tie, up(tie), down(tie), up(up(tie)), down(down(tie))]);
        }
        // Doubles of every magnitude from 1e-5 to 1e13, their bits from a xorshift.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..300_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let exponent = (state >> 52) % 60; // 2^-17 .. 2^43
            values.push(f64::from_bits(((1006 + exponent) << 52) | (state & ((1 << 52) - 1))));
        }
        for v in values {
            for x in [v, -v] {
                assert_eq!(f8(x), format!("{x:8.3}"), "{x:e}");
            }
        }
    }

    #[test]
    fn ints_print_as_display_prints_them() {
        for i in [0, 1, -1, 9, 10, 99, 100, -100, 123_456_789, i64::MAX, i64::MIN, i64::MIN + 1] {
            let mut s = String::new();
            push_int(&mut s, i);
            assert_eq!(s, i.to_string());
        }
    }
}
