//! Generated manufacturing-sensor records in the shape of the DEBS 2012 Grand Challenge data
//! set: one record every 10 ms with 66 tab-separated fields — timestamp (ns), record index,
//! 3 electrical-power readings (mf01–mf03), 3 anode current-drop (pc13–pc15) and 3 anode
//! voltage-drop readings (pc25–pc27), a reserved field, and 54 boolean valve and sensor
//! states (bm05–bm10, pp01–pp36, pc01–pc06, pc19–pc24). Analog values drift slowly;
//! booleans flip rarely.

use std::io::Write;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Field names in record order.
pub fn field_names() -> Vec<String> {
    let mut names = vec!["ts".to_string(), "index".to_string()];
    names.extend(
        [
            "mf01", "mf02", "mf03", "pc13", "pc14", "pc15", "pc25", "pc26", "pc27", "res",
        ]
        .map(String::from),
    );
    names.extend((5..=10).map(|i| format!("bm{i:02}")));
    names.extend((1..=36).map(|i| format!("pp{i:02}")));
    names.extend((1..=6).map(|i| format!("pc{i:02}")));
    names.extend((19..=24).map(|i| format!("pc{i:02}")));
    names
}

/// Gap between records, ns.
pub const RECORD_INTERVAL_NS: u64 = 10_000_000;
/// 2012-02-01T00:00:00Z in ns, the start of the generated timeline.
pub const START_NS: u64 = 1_328_054_400_000_000_000;
const ANALOG: usize = 9;
const BOOLEANS: usize = 54;
/// Typical level and wander of each analog reading (power ~ kW·10, drops ~ mV).
const LEVELS: [(f64, f64); ANALOG] = [
    (8_200.0, 400.0),
    (8_050.0, 400.0),
    (8_400.0, 400.0),
    (330.0, 40.0),
    (310.0, 40.0),
    (345.0, 40.0),
    (1_210.0, 90.0),
    (1_185.0, 90.0),
    (1_240.0, 90.0),
];

/// Produces sensor records one after another.
#[derive(Debug, Clone)]
pub struct SensorRecords {
    rng: StdRng,
    index: u64,
    analog: [f64; ANALOG],
    booleans: [bool; BOOLEANS],
}

impl SensorRecords {
    pub fn new(seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let analog = LEVELS.map(|(level, _)| level);
        let booleans = std::array::from_fn(|_| rng.random_bool(0.3));
        SensorRecords {
            rng,
            index: 0,
            analog,
            booleans,
        }
    }

    /// Appends the next record (without a newline) to `out`.
    pub fn write_next(&mut self, out: &mut Vec<u8>) {
        let ts = START_NS + self.index * RECORD_INTERVAL_NS;
        let _ = write!(out, "{ts}\t{}", self.index);
        for (value, (level, wander)) in self.analog.iter_mut().zip(LEVELS) {
            // A random walk pulled back towards its level: slowly varying, bounded.
            let step = self.rng.random_range(-1.0..1.0) * wander * 0.01;
            *value += step + (level - *value) * 0.001;
            let _ = write!(out, "\t{}", value.round() as i64);
        }
        out.extend_from_slice(b"\t0");
        for state in self.booleans.iter_mut() {
            if self.rng.random_bool(0.0005) {
                *state = !*state;
            }
            out.extend_from_slice(if *state { b"\t1" } else { b"\t0" });
        }
        self.index += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_have_the_debs_shape() {
        assert_eq!(field_names().len(), 66);
        let mut gen = SensorRecords::new(1);
        let mut sizes = Vec::new();
        let mut previous: Option<Vec<String>> = None;
        let mut flips = 0;
        for i in 0..2000u64 {
            let mut line = Vec::new();
            gen.write_next(&mut line);
            sizes.push(line.len());
            let fields: Vec<String> = String::from_utf8(line)
                .unwrap()
                .split('\t')
                .map(String::from)
                .collect();
            assert_eq!(fields.len(), 66);
            assert_eq!(fields[1], i.to_string());
            assert_eq!(
                fields[0].parse::<u64>().unwrap(),
                START_NS + i * RECORD_INTERVAL_NS
            );
            let power: f64 = fields[2].parse().unwrap();
            assert!((7_000.0..9_500.0).contains(&power), "{power}");
            assert!(fields[12..].iter().all(|b| b == "0" || b == "1"));
            if let Some(p) = &previous {
                flips += p[12..]
                    .iter()
                    .zip(&fields[12..])
                    .filter(|(a, b)| a != b)
                    .count();
                let before: f64 = p[2].parse().unwrap();
                assert!((power - before).abs() <= 5.0, "slowly varying");
            }
            previous = Some(fields);
        }
        let mean = sizes.iter().sum::<usize>() as f64 / sizes.len() as f64;
        assert!(
            (160.0..200.0).contains(&mean),
            "about 180 bytes, got {mean}"
        );
        assert!(flips > 0 && flips < 200, "booleans flip rarely: {flips}");
    }
}
