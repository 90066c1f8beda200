//! What the append-only writers (gperftools, MOJO) share: a record or event staged whole in
//! the caller's buffer goes to the sink in as many writes as the sink takes, and a sink error
//! decides whether the call counts: one of which nothing went out is dropped when the caller
//! allows it (the call is refused), otherwise the rest goes out first on the next call, so
//! once the sink recovers the file never holds half of one.

use embedded_io::Write;

/// Staged bytes `sent..staged` of the caller's staging buffer still to go out.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    /// End of the staged bytes; the next record or event is staged from here.
    pub(crate) staged: usize,
    sent: usize,
}

/// How a send failed.
pub(crate) enum Failure<E> {
    /// The sink's error.
    Sink(E),
    /// The sink took no bytes of a non-empty write (which `embedded_io::Write` forbids).
    WroteZero,
}

impl Outbox {
    /// Bytes of an earlier call are still to go out.
    pub(crate) fn pending(&self) -> bool {
        self.sent < self.staged
    }

    /// Sends the staged bytes of `staging`. On failure, also says whether the call's record
    /// counts as accepted: not when nothing of it went out and it is `droppable` (then it is
    /// unstaged), else yes (what is left stays staged for the next call).
    pub(crate) fn send<S: Write>(
        &mut self,
        sink: &mut S,
        staging: &[u8],
        droppable: bool,
    ) -> Result<(), (Failure<S::Error>, bool)> {
        while self.sent < self.staged {
            let pending = staging.get(self.sent..self.staged).unwrap_or_default();
            let accepted = !(droppable && self.sent == 0);
            let failure = match sink.write(pending) {
                Ok(n) if n > 0 => {
                    self.sent += n.min(pending.len());
                    continue;
                }
                Ok(_) => Failure::WroteZero,
                Err(error) => Failure::Sink(error),
            };
            if !accepted {
                self.staged = 0;
            }
            return Err((failure, accepted));
        }
        *self = Outbox::default();
        Ok(())
    }
}
