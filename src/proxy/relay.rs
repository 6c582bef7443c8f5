//! The hot path: copy bytes from one side to the other as they come, then hand a copy over.
//!
//! Each direction is one thread doing blocking reads and writes on raw (unbuffered) pipes: a
//! chunk is written on as soon as it is read, and only then offered to the observer through a
//! bounded channel with `try_send`. When the observer falls behind, the copy is dropped, the
//! bytes are counted, and the next copy that gets through carries a gap mark; the relay never
//! waits for the observer.

use std::io::{ErrorKind, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crossbeam_channel::{Sender, TrySendError};

use super::session::Direction;

/// The largest chunk read at once.
const CHUNK: usize = 64 * 1024;

/// What the relay hands to the observer.
#[derive(Debug)]
pub enum Tapped {
    /// Bytes relayed in `direction`, read at `at`; `gap` says bytes before them were dropped.
    Bytes {
        direction: Direction,
        bytes: Vec<u8>,
        at: Instant,
        gap: bool,
    },
    /// Nothing more will come: close the session.
    End { at: Instant },
}

/// Copies the relay could not hand over.
#[derive(Debug, Default)]
pub struct TapLoss {
    /// Chunks dropped.
    pub chunks: AtomicU64,
    /// Bytes in them.
    pub bytes: AtomicU64,
}

/// How a relay direction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PumpEnd {
    /// The source reached its end (the client closed stdin, the server closed stdout).
    SourceClosed,
    /// Reading the source failed.
    SourceFailed,
    /// The destination no longer takes bytes (the other side went away).
    DestinationClosed,
}

/// Relay `source` to `destination` until either side ends, offering each chunk to `tap`.
pub fn pump(
    direction: Direction,
    mut source: impl Read,
    mut destination: impl Write,
    tap: &Sender<Tapped>,
    loss: &Arc<TapLoss>,
) -> PumpEnd {
    let mut buffer = vec![0u8; CHUNK];
    let mut gap = false;
    let mut tapping = true;
    loop {
        let read = match source.read(&mut buffer) {
            Ok(0) => return PumpEnd::SourceClosed,
            Ok(read) => read,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return PumpEnd::SourceFailed,
        };
        let at = Instant::now();
        let chunk = &buffer[..read];
        if destination
            .write_all(chunk)
            .and_then(|()| destination.flush())
            .is_err()
        {
            return PumpEnd::DestinationClosed;
        }
        if !tapping {
            continue;
        }
        let copy = Tapped::Bytes {
            direction,
            bytes: chunk.to_vec(),
            at,
            gap,
        };
        match tap.try_send(copy) {
            Ok(()) => gap = false,
            Err(TrySendError::Full(_)) => {
                gap = true;
                loss.chunks.fetch_add(1, Ordering::Relaxed);
                loss.bytes.fetch_add(read as u64, Ordering::Relaxed);
            }
            // The observer stopped: relay on without copies.
            Err(TrySendError::Disconnected(_)) => tapping = false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader handing out its data in fixed pieces, as a pipe does.
    struct Pieces(Vec<Vec<u8>>);

    impl Read for Pieces {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() {
                return Ok(0);
            }
            let piece = self.0.remove(0);
            buf[..piece.len()].copy_from_slice(&piece);
            Ok(piece.len())
        }
    }

    #[test]
    fn bytes_are_relayed_whole_even_when_the_copies_are_dropped() {
        let pieces: Vec<Vec<u8>> = (0..10u8).map(|i| vec![b'a' + i; 100]).collect();
        let expected: Vec<u8> = pieces.concat();
        let (tap, copies) = crossbeam_channel::bounded(3);
        let loss = Arc::new(TapLoss::default());
        let mut out = Vec::new();
        let end = pump(Direction::ToServer, Pieces(pieces), &mut out, &tap, &loss);
        assert_eq!(end, PumpEnd::SourceClosed);
        assert_eq!(out, expected);
        let received: Vec<Tapped> = copies.try_iter().collect();
        assert_eq!(received.len(), 3);
        assert_eq!(loss.chunks.load(Ordering::Relaxed), 7);
        assert_eq!(loss.bytes.load(Ordering::Relaxed), 700);
        assert!(
            received
                .iter()
                .all(|t| matches!(t, Tapped::Bytes { gap: false, .. }))
        );
    }

    /// A reader that empties the tap channel before handing out its third piece.
    struct Draining {
        pieces: Pieces,
        copies: crossbeam_channel::Receiver<Tapped>,
        drained: Vec<Tapped>,
        reads: usize,
    }

    impl Read for Draining {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.reads += 1;
            if self.reads == 3 {
                self.drained.extend(self.copies.try_iter());
            }
            self.pieces.read(buf)
        }
    }

    #[test]
    fn the_copy_after_a_drop_carries_a_gap_mark() {
        let (tap, copies) = crossbeam_channel::bounded(1);
        let loss = Arc::new(TapLoss::default());
        let mut out = Vec::new();
        let mut source = Draining {
            pieces: Pieces(vec![
                b"one\n".to_vec(),
                b"two\n".to_vec(),
                b"three\n".to_vec(),
            ]),
            copies: copies.clone(),
            drained: Vec::new(),
            reads: 0,
        };
        pump(Direction::ToClient, &mut source, &mut out, &tap, &loss);
        assert_eq!(out, b"one\ntwo\nthree\n");
        assert_eq!(loss.chunks.load(Ordering::Relaxed), 1);
        let mut copies: Vec<(Vec<u8>, bool)> = source
            .drained
            .into_iter()
            .chain(copies.try_iter())
            .filter_map(|t| match t {
                Tapped::Bytes { bytes, gap, .. } => Some((bytes, gap)),
                Tapped::End { .. } => None,
            })
            .collect();
        copies.sort();
        assert_eq!(
            copies,
            [(b"one\n".to_vec(), false), (b"three\n".to_vec(), true)]
        );
    }
}
