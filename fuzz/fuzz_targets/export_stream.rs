//! The export stream reader (what `bough import` parses) on arbitrary bytes.
//!
//! Input: two control bytes, then the stream. The first sets how the bytes arrive: in pieces
//! of 1 ..= 1 + (c & 0x3f) bytes, with `Interrupted` errors now and then when bit 6 is set
//! (pipes and sockets hand data over like that; the reader must reassemble it). The second,
//! when not 0, makes the source fail with an I/O error at that fraction of the stream.
//!
//! The reader must never panic, never allocate from a length field it has not bounded (the
//! buffers it returns hold at most what arrived, with ordinary slack), and accept only what
//! the writer writes: a stream read to its trailer re-encodes to exactly the same bytes. A
//! source that failed is never read as a whole stream.
//!
//! Seeds (`fuzz/seeds/export_stream/`) are real `bough export` outputs behind the two
//! control bytes `7f 00`.
#![no_main]

use std::io::{self, Read};

use bough_export::{ExportEntry, ExportHeader, StreamError, StreamReader, StreamWriter};
use libfuzzer_sys::fuzz_target;

/// Most capacity a returned buffer may have beyond twice its length: the reader's first
/// reservation for a key or value is capped at 1 MiB and then grows with the bytes.
const SLACK: usize = 1 << 20;

/// Hands the stream over in pieces, as pipes, sockets and failing disks do.
struct Pieces<'a> {
    data: &'a [u8],
    pos: usize,
    max_piece: usize,
    interrupts: bool,
    fail_at: Option<usize>,
    state: u64,
}

impl Pieces<'_> {
    fn next(&mut self) -> u64 {
        // xorshift64: any sequence will do, it only has to be the same for the same input.
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }
}

impl Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let r = self.next();
        if self.interrupts && r.is_multiple_of(5) {
            return Err(io::ErrorKind::Interrupted.into());
        }
        if self.fail_at.is_some_and(|at| self.pos >= at) {
            return Err(io::Error::other("injected device error"));
        }
        let end = self.fail_at.unwrap_or(self.data.len()).min(self.data.len());
        let piece = 1 + (r >> 8) as usize % self.max_piece;
        let n = buf.len().min(end - self.pos).min(piece);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

fn read_all(r: impl Read) -> Result<(ExportHeader, Vec<ExportEntry>), StreamError> {
    let (mut reader, header) = StreamReader::open(r)?;
    let mut entries = Vec::new();
    while let Some(e) = reader.next_entry()? {
        assert!(
            e.key.capacity() <= 2 * e.key.len() + SLACK
                && e.value.capacity() <= 2 * e.value.len() + SLACK,
            "a buffer larger than its bytes: key {}/{}, value {}/{}",
            e.key.len(),
            e.key.capacity(),
            e.value.len(),
            e.value.capacity()
        );
        entries.push(e);
    }
    Ok((header, entries))
}

fuzz_target!(|data: &[u8]| {
    let [pieces, fail, stream @ ..] = data else {
        return;
    };
    let fail_at = (*fail != 0).then(|| usize::from(fail - 1) * stream.len() / 254);
    let source = Pieces {
        data: stream,
        pos: 0,
        max_piece: 1 + usize::from(pieces & 0x3f),
        interrupts: pieces & 0x40 != 0,
        fail_at,
        state: 0x9e37_79b9_7f4a_7c15 ^ u64::from(*pieces) ^ (stream.len() as u64) << 8,
    };
    match read_all(source) {
        Ok((header, entries)) => {
            // Reading to the end asks for one byte past the trailer: a failing source cannot
            // get that far.
            assert!(
                fail_at.is_none(),
                "a failing source was read as a whole stream"
            );
            let mut w = StreamWriter::new(Vec::new(), &header).expect("a header read back encodes");
            for e in &entries {
                w.entry(e).expect("an entry read back encodes");
            }
            let (bytes, count) = w.finish().expect("writing to memory");
            assert_eq!(count, entries.len() as u64);
            assert!(
                bytes == stream,
                "the reader accepted a stream the writer would not write"
            );
        }
        Err(e) => {
            assert!(
                e.offset <= stream.len() as u64,
                "error offset {} past the {} bytes: {e}",
                e.offset,
                stream.len()
            );
        }
    }
});
