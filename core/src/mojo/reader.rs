//! Streaming event reader over the caller's window.
//!
//! An event has no length field: its end is found by decoding it. The reader decodes from
//! the window; when an event runs past what is buffered it moves the unread bytes to the
//! front, reads until the window is full (or the file ends) and decodes again, so each byte
//! is decoded at most twice and time stays linear in the file size. An event longer than
//! the whole window (its strings are) is a capacity error, not a format one.

use core::ops::Range;

use embedded_io::Read;

use crate::inbox::Inbox;

use super::varint::{self, Varint, VarintError};
use super::{Event, FrameDef, ReadError, Rule, LATEST_VERSION, MAGIC};

/// The least window: the header (`"MOJ"` and a ten-byte varint) and any event without
/// strings fit in it.
pub const MIN_WINDOW: usize = 80;

/// Streams a MOJO file's events.
pub struct Reader<'w, R: Read> {
    inbox: Inbox<'w, R>,
    version: u8,
    /// The file is still being written: an event cut by the source's end is not yet whole,
    /// not truncated.
    growing: bool,
}

/// Why an event could not be decoded from the buffered bytes.
enum Stop {
    /// More bytes are needed.
    Incomplete,
    Broken(Rule),
}

impl From<VarintError> for Stop {
    fn from(e: VarintError) -> Self {
        match e {
            VarintError::Incomplete => Stop::Incomplete,
            VarintError::Overflow => Stop::Broken(Rule::VarintOverflow),
        }
    }
}

/// Decodes fields from the front of a buffer.
struct Fields<'b> {
    buf: &'b [u8],
    at: usize,
}

impl Fields<'_> {
    fn varint(&mut self) -> Result<Varint, Stop> {
        let (v, n) = varint::decode(self.buf.get(self.at..).unwrap_or_default())?;
        self.at += n;
        Ok(v)
    }

    /// A field Austin writes without a sign; a negative zero reads as zero.
    fn unsigned(&mut self) -> Result<u64, Stop> {
        match self.varint()? {
            Varint { negative: true, magnitude } if magnitude != 0 => Err(Stop::Broken(Rule::OutOfRange)),
            v => Ok(v.magnitude),
        }
    }

    fn signed(&mut self) -> Result<i64, Stop> {
        let Varint { negative, magnitude } = self.varint()?;
        let value = if negative { 0i64.checked_sub_unsigned(magnitude) } else { i64::try_from(magnitude).ok() };
        value.ok_or(Stop::Broken(Rule::OutOfRange))
    }

    /// A NUL-terminated string: its bytes' range, the NUL consumed.
    fn string(&mut self) -> Result<Range<usize>, Stop> {
        let rest = self.buf.get(self.at..).unwrap_or_default();
        let len = rest.iter().position(|&b| b == 0).ok_or(Stop::Incomplete)?;
        let range = self.at..self.at + len;
        self.at += len + 1;
        Ok(range)
    }
}

/// Decodes the event at the front of `buf`: the event with its strings as ranges of `buf`,
/// and its length.
fn decode(buf: &[u8], version: u8) -> Result<(Event<Range<usize>>, usize), Stop> {
    let id = *buf.first().ok_or(Stop::Incomplete)?;
    let mut f = Fields { buf, at: 1 };
    let event = match id {
        1 => Event::Metadata { key: f.string()?, value: f.string()? },
        2 => {
            let pid = f.unsigned()?;
            let iid = if version >= 3 { f.unsigned()? } else { 0 };
            Event::Stack { pid, iid, tid: f.string()? }
        }
        3 => {
            let (key, filename, scope, line) = (f.unsigned()?, f.unsigned()?, f.unsigned()?, f.unsigned()?);
            let (line_end, column, column_end) =
                if version >= 2 { (f.unsigned()?, f.unsigned()?, f.unsigned()?) } else { (0, 0, 0) };
            Event::Frame(FrameDef { key, filename, scope, line, line_end, column, column_end })
        }
        4 => Event::FrameInvalid,
        5 => Event::FrameRef { key: f.unsigned()? },
        6 => Event::FrameKernel { symbol: f.string()? },
        7 => Event::Gc,
        8 => Event::Idle,
        9 => Event::Time(f.signed()?),
        10 => Event::Memory(f.signed()?),
        11 => Event::String { key: f.unsigned()?, value: f.string()? },
        12 => Event::StringRef { key: f.unsigned()? },
        13 => Event::StackRepeat,
        14 => Event::TaskStack { task: f.unsigned()?, name: f.unsigned()?, frames: f.unsigned()? },
        15 => Event::TaskWaiter { task: f.unsigned()?, waiter: f.unsigned()? },
        16 => Event::TaskRunning { task: f.unsigned()? },
        id => return Err(Stop::Broken(Rule::UnknownEvent { id })),
    };
    Ok((event, f.at))
}

impl<'w, R: Read> Reader<'w, R> {
    /// Reads the header. `window` must have [`MIN_WINDOW`] bytes; events longer than it are
    /// refused ([`ReadError::TooLarge`]): Austin's longest are file paths and kernel
    /// symbols, so 64 KiB reads every real file.
    pub fn open(source: R, window: &'w mut [u8]) -> Result<Self, ReadError<R::Error>> {
        if window.len() < MIN_WINDOW {
            return Err(ReadError::WindowTooSmall { len: window.len(), needed: MIN_WINDOW });
        }
        let mut r = Reader { inbox: Inbox::new(source, window), version: 0, growing: false };
        r.inbox.fill(MIN_WINDOW)?;
        let head = r.inbox.buffered();
        let format = |rule| Err(ReadError::Format { offset: 0, rule });
        if head.len() < MAGIC.len() {
            return format(if MAGIC.starts_with(head) { Rule::Truncated } else { Rule::NotMojo });
        }
        if head.get(..MAGIC.len()) != Some(&MAGIC[..]) {
            return format(Rule::NotMojo);
        }
        let (version, n) = match varint::decode(head.get(MAGIC.len()..).unwrap_or_default()) {
            Ok(v) => v,
            Err(VarintError::Incomplete) => return format(Rule::Truncated),
            Err(VarintError::Overflow) => return format(Rule::VarintOverflow),
        };
        if version.negative || !(1..=u64::from(LATEST_VERSION)).contains(&version.magnitude) {
            return format(Rule::Version { version: version.magnitude });
        }
        r.version = version.magnitude as u8;
        r.inbox.consume(MAGIC.len() + n);
        Ok(r)
    }

    /// Reads on in a file still being written: `source` holds the file from `offset`, where
    /// an event starts (the [`Reader::offset`] of an earlier reader of the file, after its
    /// header or an event), and the file is of `version` (that reader's
    /// [`Reader::version`]). Events come as [`Reader::next_item`] gives them, except that
    /// the end of what the source holds ends them even in the middle of an event: `Ok(None)`,
    /// with [`Reader::offset`] where that event starts, for a later reader to resume at once
    /// more is written.
    pub fn resume(source: R, window: &'w mut [u8], version: u8, offset: u64) -> Result<Self, ReadError<R::Error>> {
        if window.len() < MIN_WINDOW {
            return Err(ReadError::WindowTooSmall { len: window.len(), needed: MIN_WINDOW });
        }
        if !(1..=LATEST_VERSION).contains(&version) {
            return Err(ReadError::Format { offset: 0, rule: Rule::Version { version: u64::from(version) } });
        }
        Ok(Reader { inbox: Inbox::at(source, window, offset), version, growing: true })
    }

    /// The file's version (1 to 4).
    pub fn version(&self) -> u8 {
        self.version
    }

    /// File offset of the next event.
    pub fn offset(&self) -> u64 {
        self.inbox.offset()
    }

    /// The next event and its file offset; `None` at the end of the file (of what has been
    /// written, for a reader that [resumes](Reader::resume)).
    #[allow(clippy::type_complexity)]
    pub fn next_item(&mut self) -> Result<Option<(u64, Event<&[u8]>)>, ReadError<R::Error>> {
        let inbox = &mut self.inbox;
        loop {
            if inbox.len() == 0 {
                if inbox.eof() {
                    return Ok(None);
                }
                inbox.fill(inbox.capacity())?;
                continue;
            }
            let offset = inbox.offset();
            match decode(inbox.buffered(), self.version) {
                Ok((event, len)) => {
                    let bytes = inbox.take(len);
                    let event = event.map(|r| bytes.get(r.start..r.end).unwrap_or_default());
                    return Ok(Some((offset, event)));
                }
                Err(Stop::Broken(rule)) => return Err(ReadError::Format { offset, rule }),
                // (One longer than the window never will be: a capacity error, below.)
                Err(Stop::Incomplete) if inbox.eof() && self.growing && inbox.len() < inbox.capacity() => {
                    return Ok(None)
                }
                Err(Stop::Incomplete) if inbox.eof() => {
                    return Err(ReadError::Format { offset, rule: Rule::Truncated })
                }
                Err(Stop::Incomplete) if inbox.len() == inbox.capacity() => {
                    return Err(ReadError::TooLarge { offset, window: inbox.capacity() })
                }
                // The event runs past the buffered bytes: as many more as the window holds.
                Err(Stop::Incomplete) => inbox.fill(inbox.capacity())?,
            }
        }
    }

    /// The source, for example to read on after the events the caller wanted.
    pub fn into_inner(self) -> R {
        self.inbox.into_source()
    }
}
