//! The envelope header at the start of every payload: format version, producer id, sequence
//! number and intended send time, fixed-size little-endian, so that a consumer can compute
//! end-to-end latency and the delivery ledger from the message alone.

/// Bytes of the header. Byte 0: version; bytes 1–3: reserved (zero); 4–7: producer id (u32);
/// 8–15: sequence number (u64); 16–23: intended send time (u64, ns since the UNIX epoch).
pub use brokerbench_model::ENVELOPE_HEADER_LEN;
/// Current format version.
pub const ENVELOPE_VERSION: u8 = 1;

/// The decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    /// Run-wide id of the producer that sent the message.
    pub producer: u32,
    /// Per-producer sequence number, from 0, without gaps.
    pub sequence: u64,
    /// When the schedule intended the message to be sent, ns since the UNIX epoch.
    pub intended_ns: u64,
}

/// Why a payload could not be read as an envelope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("payload of {0} bytes is shorter than the {ENVELOPE_HEADER_LEN}-byte envelope header")]
    TooShort(usize),
    #[error("unknown envelope version {0} (this build reads version {ENVELOPE_VERSION})")]
    Version(u8),
}

impl Envelope {
    /// Writes the header into the first [`ENVELOPE_HEADER_LEN`] bytes of `buffer`.
    #[inline]
    pub fn write(&self, buffer: &mut [u8]) {
        let header = &mut buffer[..ENVELOPE_HEADER_LEN];
        header[0] = ENVELOPE_VERSION;
        header[1..4].fill(0);
        header[4..8].copy_from_slice(&self.producer.to_le_bytes());
        header[8..16].copy_from_slice(&self.sequence.to_le_bytes());
        header[16..24].copy_from_slice(&self.intended_ns.to_le_bytes());
    }

    /// Reads the header at the start of `payload`.
    #[inline]
    pub fn read(payload: &[u8]) -> Result<Envelope, EnvelopeError> {
        if payload.len() < ENVELOPE_HEADER_LEN {
            return Err(EnvelopeError::TooShort(payload.len()));
        }
        if payload[0] != ENVELOPE_VERSION {
            return Err(EnvelopeError::Version(payload[0]));
        }
        let u32_at = |i: usize| u32::from_le_bytes(payload[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(payload[i..i + 8].try_into().expect("8 bytes"));
        Ok(Envelope {
            producer: u32_at(4),
            sequence: u64_at(8),
            intended_ns: u64_at(16),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let e = Envelope {
            producer: 7,
            sequence: 0x0102_0304_0506_0708,
            intended_ns: 1_763_000_000_123_456_789,
        };
        let mut buf = vec![0xAAu8; 100];
        e.write(&mut buf);
        assert_eq!(Envelope::read(&buf), Ok(e));
        assert_eq!(
            &buf[ENVELOPE_HEADER_LEN..],
            &[0xAA; 76][..],
            "body untouched"
        );
        assert_eq!(
            buf[4..8],
            7u32.to_le_bytes(),
            "little-endian producer id at byte 4"
        );
    }

    #[test]
    fn malformed() {
        assert_eq!(Envelope::read(&[1; 10]), Err(EnvelopeError::TooShort(10)));
        let mut buf = [0u8; 24];
        buf[0] = 9;
        assert_eq!(Envelope::read(&buf), Err(EnvelopeError::Version(9)));
    }
}
