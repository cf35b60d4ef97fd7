//! Message bodies and keys. A body is written after the envelope header: random bytes from a
//! pool, a replayed file record (from RAM or read from disk while sending), or a generated
//! sensor record.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

use brokerbench_model::{KeyDistribution, Payload, ENVELOPE_HEADER_LEN, KEY_SPACE};

use crate::sensor::SensorRecords;

/// What can go wrong preparing or reading payloads.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    #[error("payload.path: cannot read '{path}': {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("payload.path: '{0}' has no records; it needs one record per line")]
    Empty(PathBuf),
    #[error("payload.path: '{path}' is {actual} bytes, and every message is that file: message_size must be {actual}B (it is {expected}B)")]
    Length {
        path: PathBuf,
        actual: usize,
        expected: u64,
    },
}

/// Data shared by all producers, prepared once before the run.
#[derive(Debug, Clone)]
pub enum SharedPayload {
    Random(Arc<Vec<Box<[u8]>>>),
    Records(Arc<Vec<Box<[u8]>>>),
    Disk(PathBuf),
    Sensor,
}

impl SharedPayload {
    /// Builds the random pool or loads the file, before the clock starts.
    pub fn prepare(
        payload: &Payload,
        message_size: u64,
        seed: u64,
    ) -> Result<SharedPayload, PayloadError> {
        match payload {
            Payload::Random { pool, random_ratio } => {
                let mut rng = StdRng::seed_from_u64(seed);
                let body = message_size as usize - ENVELOPE_HEADER_LEN;
                // The header stands for random bytes too: the random share of the whole
                // message is `random_ratio`, as in OMB (random first, then zeros).
                let random = ((message_size as f64 * random_ratio) as usize)
                    .saturating_sub(ENVELOPE_HEADER_LEN)
                    .min(body);
                let bodies = (0..*pool)
                    .map(|_| {
                        let mut b = vec![0u8; body].into_boxed_slice();
                        rng.fill_bytes(&mut b[..random]);
                        b
                    })
                    .collect();
                Ok(SharedPayload::Random(Arc::new(bodies)))
            }
            Payload::Binary { path } => {
                let bytes = std::fs::read(path).map_err(|source| PayloadError::Read {
                    path: path.clone(),
                    source,
                })?;
                if bytes.len() as u64 != message_size {
                    return Err(PayloadError::Length {
                        path: path.clone(),
                        actual: bytes.len(),
                        expected: message_size,
                    });
                }
                let body: Box<[u8]> = bytes[ENVELOPE_HEADER_LEN..].into();
                Ok(SharedPayload::Random(Arc::new(vec![body])))
            }
            Payload::File {
                path,
                read_in_ram: true,
            } => {
                let text = std::fs::read(path).map_err(|source| PayloadError::Read {
                    path: path.clone(),
                    source,
                })?;
                let records: Vec<Box<[u8]>> = text
                    .split(|&b| b == b'\n')
                    .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
                    .filter(|l| !l.is_empty())
                    .map(Box::from)
                    .collect();
                if records.is_empty() {
                    return Err(PayloadError::Empty(path.clone()));
                }
                Ok(SharedPayload::Records(Arc::new(records)))
            }
            Payload::File {
                path,
                read_in_ram: false,
            } => {
                let mut probe = DiskRecords::open(path)?;
                let mut line = Vec::new();
                probe.next(&mut line)?;
                Ok(SharedPayload::Disk(path.clone()))
            }
            Payload::Sensor => Ok(SharedPayload::Sensor),
        }
    }

    /// A per-producer body source; `producer` spreads producers over the pool and seeds.
    pub fn source(&self, producer: u32, seed: u64) -> Result<BodySource, PayloadError> {
        Ok(match self {
            SharedPayload::Random(pool) => BodySource::Pool {
                next: producer as usize % pool.len(),
                pool: pool.clone(),
            },
            SharedPayload::Records(records) => BodySource::Pool {
                next: 0,
                pool: records.clone(),
            },
            SharedPayload::Disk(path) => BodySource::Disk(DiskRecords::open(path)?),
            SharedPayload::Sensor => {
                BodySource::Sensor(Box::new(SensorRecords::new(seed ^ producer as u64)))
            }
        })
    }
}

/// Reads records line by line from disk, from the start again at the end of the file.
#[derive(Debug)]
pub struct DiskRecords {
    path: PathBuf,
    reader: BufReader<File>,
}

impl DiskRecords {
    fn open(path: &Path) -> Result<DiskRecords, PayloadError> {
        let file = File::open(path).map_err(|source| PayloadError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(DiskRecords {
            path: path.to_path_buf(),
            reader: BufReader::with_capacity(64 * 1024, file),
        })
    }

    /// Appends the next non-empty record; at the end of the file it starts again.
    fn next(&mut self, out: &mut Vec<u8>) -> Result<(), PayloadError> {
        let start = out.len();
        let mut rewound_without_record = false;
        loop {
            let read = self
                .reader
                .read_until(b'\n', out)
                .map_err(|source| PayloadError::Read {
                    path: self.path.clone(),
                    source,
                })?;
            while out.len() > start && matches!(out.last(), Some(b'\n' | b'\r')) {
                out.pop();
            }
            if out.len() > start {
                return Ok(());
            }
            if read == 0 {
                if rewound_without_record {
                    return Err(PayloadError::Empty(self.path.clone()));
                }
                rewound_without_record = true;
                self.reader
                    .seek(SeekFrom::Start(0))
                    .map_err(|source| PayloadError::Read {
                        path: self.path.clone(),
                        source,
                    })?;
            }
        }
    }
}

/// One producer's body source.
#[derive(Debug)]
pub enum BodySource {
    Pool {
        pool: Arc<Vec<Box<[u8]>>>,
        next: usize,
    },
    Disk(DiskRecords),
    Sensor(Box<SensorRecords>),
}

impl BodySource {
    /// Clears `message`, leaves room for the envelope header and appends the next body.
    #[inline]
    pub fn fill(&mut self, message: &mut Vec<u8>) -> Result<(), PayloadError> {
        message.clear();
        message.resize(ENVELOPE_HEADER_LEN, 0);
        match self {
            BodySource::Pool { pool, next } => {
                message.extend_from_slice(&pool[*next]);
                *next += 1;
                if *next == pool.len() {
                    *next = 0;
                }
            }
            BodySource::Disk(disk) => disk.next(message)?,
            BodySource::Sensor(sensor) => sensor.write_next(message),
        }
        Ok(())
    }
}

/// Makes message keys.
#[derive(Debug)]
pub struct Keys {
    distribution: KeyDistribution,
    counter: u64,
    rng: StdRng,
    buffer: Vec<u8>,
}

impl Keys {
    pub fn new(distribution: KeyDistribution, seed: u64) -> Self {
        Keys {
            distribution,
            counter: 0,
            rng: StdRng::seed_from_u64(seed),
            buffer: Vec::with_capacity(8),
        }
    }

    /// The next key: a decimal number below [`KEY_SPACE`], or none.
    #[inline]
    pub fn next_key(&mut self) -> Option<&[u8]> {
        let n = match self.distribution {
            KeyDistribution::None => return None,
            KeyDistribution::RoundRobin => {
                let n = self.counter % KEY_SPACE;
                self.counter += 1;
                n
            }
            KeyDistribution::Random => self.rng.random_range(0..KEY_SPACE),
        };
        self.buffer.clear();
        use std::io::Write;
        let _ = write!(self.buffer, "{n}");
        Some(&self.buffer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn random_bodies_fill_the_message_size() {
        let shared = SharedPayload::prepare(
            &Payload::Random {
                pool: 3,
                random_ratio: 1.0,
            },
            100,
            1,
        )
        .unwrap();
        let mut source = shared.source(0, 1).unwrap();
        let mut bodies = Vec::new();
        for _ in 0..4 {
            let mut m = Vec::new();
            source.fill(&mut m).unwrap();
            assert_eq!(m.len(), 100);
            bodies.push(m);
        }
        assert_ne!(bodies[0], bodies[1]);
        assert_eq!(bodies[0], bodies[3], "the pool of 3 cycles");
    }

    #[test]
    fn a_random_ratio_leaves_the_rest_of_each_message_zero() {
        let payload = Payload::Random {
            pool: 2,
            random_ratio: 0.5,
        };
        let shared = SharedPayload::prepare(&payload, 1000, 1).unwrap();
        let mut m = Vec::new();
        shared.source(0, 1).unwrap().fill(&mut m).unwrap();
        assert_eq!(m.len(), 1000);
        assert!(m[500..].iter().all(|&b| b == 0), "the second half is zeros");
        let nonzero = m[ENVELOPE_HEADER_LEN..500]
            .iter()
            .filter(|&&b| b != 0)
            .count();
        assert!(
            nonzero > 400,
            "the first half after the header is random: {nonzero}"
        );
    }

    #[test]
    fn a_binary_file_is_every_message_and_must_be_message_size_long() {
        let path = std::env::temp_dir().join(format!("bb-binary-{}.data", std::process::id()));
        let bytes: Vec<u8> = (0..200u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let payload = Payload::Binary { path: path.clone() };
        let e = SharedPayload::prepare(&payload, 100, 1)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("200 bytes") && e.contains("message_size must be 200B"),
            "{e}"
        );
        let shared = SharedPayload::prepare(&payload, 200, 1).unwrap();
        let mut source = shared.source(3, 1).unwrap();
        for _ in 0..2 {
            let mut m = Vec::new();
            source.fill(&mut m).unwrap();
            assert_eq!(&m[ENVELOPE_HEADER_LEN..], &bytes[ENVELOPE_HEADER_LEN..]);
        }
        std::fs::remove_file(path).unwrap();
    }

    fn data_file(text: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!(
            "bb-payload-{}-{}.tsv",
            std::process::id(),
            text.len()
        ));
        std::fs::File::create(&path)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        path
    }

    #[test]
    fn file_records_replay_in_a_loop_from_ram_and_disk() {
        let path = data_file("a\tb\nccc\r\n\nd\n");
        for read_in_ram in [true, false] {
            let payload = Payload::File {
                path: path.clone(),
                read_in_ram,
            };
            let shared = SharedPayload::prepare(&payload, 100, 1).unwrap();
            let mut source = shared.source(0, 1).unwrap();
            let mut got = Vec::new();
            for _ in 0..5 {
                let mut m = Vec::new();
                source.fill(&mut m).unwrap();
                got.push(String::from_utf8(m[ENVELOPE_HEADER_LEN..].to_vec()).unwrap());
            }
            assert_eq!(
                got,
                ["a\tb", "ccc", "d", "a\tb", "ccc"],
                "read_in_ram={read_in_ram}"
            );
        }
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn missing_and_empty_files_are_errors_naming_the_field() {
        let missing = Payload::File {
            path: "/nonexistent/data.tsv".into(),
            read_in_ram: true,
        };
        let e = SharedPayload::prepare(&missing, 100, 1)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("payload.path") && e.contains("/nonexistent/data.tsv"),
            "{e}"
        );
        let empty = data_file("\n\n");
        for read_in_ram in [true, false] {
            let p = Payload::File {
                path: empty.clone(),
                read_in_ram,
            };
            assert!(matches!(
                SharedPayload::prepare(&p, 100, 1),
                Err(PayloadError::Empty(_))
            ));
        }
    }

    #[test]
    fn keys() {
        let mut k = Keys::new(KeyDistribution::RoundRobin, 0);
        assert_eq!(k.next_key(), Some(&b"0"[..]));
        assert_eq!(k.next_key(), Some(&b"1"[..]));
        assert_eq!(Keys::new(KeyDistribution::None, 0).next_key(), None);
        let mut r = Keys::new(KeyDistribution::Random, 0);
        let n: u64 = std::str::from_utf8(r.next_key().unwrap())
            .unwrap()
            .parse()
            .unwrap();
        assert!(n < KEY_SPACE);
    }
}
