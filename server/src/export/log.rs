//! LevelDB's log format, in which a managed export's `output-N` files (and its
//! `.overall_export_metadata`) hold their records: 32 KiB blocks, each record cut into
//! fragments that fit, each fragment behind a 7-byte header — the masked CRC-32C of its type
//! and data (little-endian), its length (two bytes, little-endian), its type (`FULL`, or
//! `FIRST`, `MIDDLE`…, `LAST`). A block's last 6 bytes or fewer, too few for a header, are
//! zeros, as LevelDB's own description of its log format says.
//!
//! The reader streams: it holds one block and the record being put together, and refuses a
//! damaged file (a checksum that does not match, a fragment out of order, a record cut short)
//! with the offset of the record it was reading.

use std::io::{self, Read, Write};

/// A block's size.
pub(crate) const BLOCK: usize = 32 * 1024;
/// A fragment's header: checksum (4), length (2), type (1).
const HEADER: usize = 7;
/// The largest record the reader puts together: the service's entities are at most 1 MiB,
/// and nothing in an export is larger than that and its key; this bounds what a damaged
/// length (or a hostile file) makes the reader hold.
pub(crate) const MAX_RECORD: usize = 16 << 20;

/// A fragment's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A whole record.
    Full = 1,
    /// A record's first fragment.
    First = 2,
    /// A fragment between its first and last.
    Middle = 3,
    /// A record's last fragment.
    Last = 4,
}

/// A fragment read: its offset in the file, its type, and its data's start and length in
/// the block.
type Fragment = (u64, Kind, (usize, usize));

/// What is wrong with a log file.
#[derive(Debug)]
pub(crate) enum LogError {
    /// The file could not be read.
    Io(io::Error),
    /// A record is damaged: its offset in the file, and how.
    Damaged { offset: u64, reason: String },
}

impl From<io::Error> for LogError {
    fn from(error: io::Error) -> LogError {
        LogError::Io(error)
    }
}

/// LevelDB's checksum of a fragment: CRC-32C, rotated and offset ("masked") so that a
/// checksum of data that holds checksums is not itself a likely value.
fn masked_crc(kind: u8, data: &[u8]) -> u32 {
    let crc = crc32c::crc32c_append(crc32c::crc32c(&[kind]), data);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// The records of a log, read one at a time from `R`.
pub(crate) struct LogReader<R> {
    source: R,
    block: Box<[u8]>,
    /// The bytes of `block` read from the file, and where the next fragment starts.
    filled: usize,
    at: usize,
    /// The file offset of `block`'s first byte.
    block_offset: u64,
    /// Whether the file has no more blocks.
    ended: bool,
}

impl<R: Read> LogReader<R> {
    /// A reader of the log `source` holds, from its start.
    pub(crate) fn new(source: R) -> LogReader<R> {
        LogReader {
            source,
            block: vec![0; BLOCK].into_boxed_slice(),
            filled: 0,
            at: 0,
            block_offset: 0,
            ended: false,
        }
    }

    /// The next record into `record` (cleared first), and its offset in the file; `None` at
    /// the end of the log.
    pub(crate) fn next_into(&mut self, record: &mut Vec<u8>) -> Result<Option<u64>, LogError> {
        record.clear();
        let mut start = None;
        loop {
            let fragment = self.fragment().map_err(|error| match (error, start) {
                // A damaged fragment of a record is reported at the record.
                (LogError::Damaged { offset, reason }, Some(first)) => LogError::Damaged {
                    offset: first,
                    reason: format!("{reason} (its fragment at byte {offset})"),
                },
                (error, _) => error,
            })?;
            let Some((offset, kind, data)) = fragment else {
                return match start {
                    None => Ok(None),
                    Some(offset) => Err(LogError::Damaged {
                        offset,
                        reason: "the file ends inside a record (its last fragment is missing)"
                            .to_owned(),
                    }),
                };
            };
            let (data_start, data_len) = data;
            let out_of_order = |offset| LogError::Damaged {
                offset,
                reason: format!("a {kind:?} fragment where a record's next fragment belongs"),
            };
            match (kind, start) {
                (Kind::Full, None) => {
                    record.extend_from_slice(&self.block[data_start..data_start + data_len]);
                    return Ok(Some(offset));
                }
                (Kind::First, None) => start = Some(offset),
                (Kind::Middle | Kind::Last, Some(_)) => {}
                (Kind::Full | Kind::First, Some(first)) => return Err(out_of_order(first)),
                (Kind::Middle | Kind::Last, None) => return Err(out_of_order(offset)),
            }
            if record.len() + data_len > MAX_RECORD {
                return Err(LogError::Damaged {
                    offset: start.unwrap_or(offset),
                    reason: format!("a record longer than {MAX_RECORD} bytes"),
                });
            }
            record.extend_from_slice(&self.block[data_start..data_start + data_len]);
            if kind == Kind::Last {
                return Ok(start);
            }
        }
    }

    /// The next fragment: its offset, type, and where its data lies in `block`.
    fn fragment(&mut self) -> Result<Option<Fragment>, LogError> {
        loop {
            if self.filled - self.at < HEADER {
                // The rest of a whole block too short for a header is its trailer; in the
                // file's last block, bytes too few for a header are a header cut short.
                if self.filled < BLOCK && self.at < self.filled {
                    return Err(LogError::Damaged {
                        offset: self.block_offset + self.at as u64,
                        reason: "the file ends inside a fragment's header".to_owned(),
                    });
                }
                if !self.next_block()? {
                    return Ok(None);
                }
                continue;
            }
            let offset = self.block_offset + self.at as u64;
            let header = &self.block[self.at..self.at + HEADER];
            let crc = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
            let length = usize::from(u16::from_le_bytes([header[4], header[5]]));
            let kind = header[6];
            if kind == 0 && length == 0 && crc == 0 {
                // A writer's zeroed rest of a block (LevelDB writes it before it reuses one).
                self.at = self.filled;
                continue;
            }
            let damaged = |reason: String| LogError::Damaged { offset, reason };
            let kind = match kind {
                1 => Kind::Full,
                2 => Kind::First,
                3 => Kind::Middle,
                4 => Kind::Last,
                other => return Err(damaged(format!("an unknown fragment type {other}"))),
            };
            let data_start = self.at + HEADER;
            if data_start + length > self.filled {
                return Err(damaged(format!(
                    "a fragment of {length} bytes that runs past its block or the file's end"
                )));
            }
            let data = &self.block[data_start..data_start + length];
            if masked_crc(kind as u8, data) != crc {
                return Err(damaged("its checksum does not match its bytes".to_owned()));
            }
            self.at = data_start + length;
            return Ok(Some((offset, kind, (data_start, length))));
        }
    }

    /// Reads the next block; `false` at the end of the file.
    fn next_block(&mut self) -> Result<bool, LogError> {
        if self.ended {
            return Ok(false);
        }
        self.block_offset += self.filled as u64;
        self.filled = 0;
        self.at = 0;
        while self.filled < BLOCK {
            match self.source.read(&mut self.block[self.filled..]) {
                Ok(0) => break,
                Ok(n) => self.filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(LogError::Io(e)),
            }
        }
        if self.filled < BLOCK {
            self.ended = true;
        }
        Ok(self.filled > 0)
    }
}

/// A log written record by record into `W`.
pub(crate) struct LogWriter<W> {
    sink: W,
    /// Where in its block the next fragment starts.
    at: usize,
    /// The bytes written so far.
    written: u64,
}

impl<W: Write> LogWriter<W> {
    /// A writer of a new log into `sink`.
    pub(crate) fn new(sink: W) -> LogWriter<W> {
        LogWriter {
            sink,
            at: 0,
            written: 0,
        }
    }

    /// The bytes written so far.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    /// Appends `record`, cut into fragments that fit their blocks.
    pub(crate) fn append(&mut self, record: &[u8]) -> io::Result<()> {
        let mut rest = record;
        let mut first = true;
        loop {
            let left = BLOCK - self.at;
            if left < HEADER {
                self.put(&[0; HEADER][..left])?;
                self.at = 0;
                continue;
            }
            let room = left - HEADER;
            let (data, more) = match rest.len() > room {
                true => (&rest[..room], &rest[room..]),
                false => (rest, &[][..]),
            };
            let last = more.is_empty();
            let kind = match (first, last) {
                (true, true) => Kind::Full,
                (true, false) => Kind::First,
                (false, false) => Kind::Middle,
                (false, true) => Kind::Last,
            } as u8;
            let length = u16::try_from(data.len()).map_err(io::Error::other)?;
            let mut header = [0u8; HEADER];
            header[..4].copy_from_slice(&masked_crc(kind, data).to_le_bytes());
            header[4..6].copy_from_slice(&length.to_le_bytes());
            header[6] = kind;
            self.put(&header)?;
            self.put(data)?;
            self.at += HEADER + data.len();
            if last {
                return Ok(());
            }
            rest = more;
            first = false;
        }
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.sink.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// The sink, flushed.
    pub(crate) fn finish(mut self) -> io::Result<W> {
        self.sink.flush()?;
        Ok(self.sink)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(bytes: &[u8]) -> Result<Vec<Vec<u8>>, LogError> {
        let mut reader = LogReader::new(bytes);
        let mut out = Vec::new();
        let mut record = Vec::new();
        while reader.next_into(&mut record)?.is_some() {
            out.push(record.clone());
        }
        Ok(out)
    }

    #[test]
    fn records_of_every_size_come_back_across_blocks() {
        let sizes = [
            0,
            1,
            BLOCK - 2 * HEADER,
            BLOCK - HEADER,
            BLOCK,
            3 * BLOCK + 5,
            10,
        ];
        let written: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, n)| (0..*n).map(|j| (i * 31 + j) as u8).collect())
            .collect();
        let mut writer = LogWriter::new(Vec::new());
        for record in &written {
            writer.append(record).unwrap();
        }
        let bytes = writer.finish().unwrap();
        assert_eq!(records(&bytes).unwrap(), written);
    }

    #[test]
    fn the_checksum_is_leveldbs() {
        // A record of the legacy emulator's `.overall_export_metadata`: its version, "3".
        let mut writer = LogWriter::new(Vec::new());
        writer.append(b"3").unwrap();
        assert_eq!(
            writer.finish().unwrap(),
            [0xb8, 0x6d, 0x44, 0x4e, 0x01, 0x00, 0x01, b'3']
        );
    }

    #[test]
    fn damage_is_refused_with_the_records_offset() {
        let mut writer = LogWriter::new(Vec::new());
        writer.append(b"first").unwrap();
        writer.append(&[7; 40_000]).unwrap();
        let bytes = writer.finish().unwrap();
        let mut flipped = bytes.clone();
        flipped[20] ^= 1;
        match records(&flipped) {
            Err(LogError::Damaged { offset, reason }) => {
                assert_eq!(offset, 12);
                assert!(reason.contains("checksum"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        match records(&bytes[..bytes.len() - 3]) {
            Err(LogError::Damaged { offset, .. }) => assert_eq!(offset, 12),
            other => panic!("{other:?}"),
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Any bytes read as a log: records or an error, never a panic.
        #[test]
        fn any_bytes_read_without_panic(bytes in proptest::collection::vec(0u8..=255, 0..80_000)) {
            let _ = records(&bytes);
        }

        /// A log written, then damaged here and there or cut: the records written, or an
        /// error, never a panic; undamaged, exactly the records written.
        #[test]
        fn a_damaged_log_reads_without_panic(
            written in proptest::collection::vec(proptest::collection::vec(0u8..=255, 0..40_000), 0..6),
            flips in proptest::collection::vec((0usize..200_000, 0u8..=255), 0..4),
            cut in proptest::option::of(0usize..200_000),
        ) {
            let mut writer = LogWriter::new(Vec::new());
            for record in &written {
                writer.append(record).unwrap();
            }
            let mut bytes = writer.finish().unwrap();
            if flips.is_empty() && cut.is_none() {
                proptest::prop_assert_eq!(records(&bytes).unwrap(), written);
                return Ok(());
            }
            for (at, xor) in flips {
                if !bytes.is_empty() {
                    let at = at % bytes.len();
                    bytes[at] ^= xor;
                }
            }
            if let Some(cut) = cut {
                bytes.truncate(cut.min(bytes.len()));
            }
            let _ = records(&bytes);
        }
    }
}
