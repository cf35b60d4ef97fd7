//! HdrHistogram interval logs (publish.hlog, e2e.hlog) in the standard log format version 1.3,
//! readable by HistogramLogAnalyzer, the Java `HistogramLogReader` and the Rust
//! `hdrhistogram::serialization::interval_log::IntervalLogIterator`.
//!
//! Values are nanoseconds. Each interval line is
//! `<start s since BaseTime>,<length s>,<max in ms>,<base64 V2 deflate histogram>`; the max is
//! divided by 10^6 as the Java writer does by default, so tools that assume ns show ms.

use std::io::{self, Write};

use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

use crate::time::{rfc3339_utc, seconds_with_millis};

/// Header line naming the log format version.
pub(crate) const FORMAT_VERSION_LINE: &str = "#[Histogram log format version 1.3]";
/// Column legend line of the format.
pub(crate) const LEGEND_LINE: &str =
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"";

/// Writes one interval log; every interval is one line, so a crash loses at most the line
/// being written.
pub struct HistogramLogWriter<W: Write> {
    writer: W,
    base_ns: u64,
    serializer: V2DeflateSerializer,
    serialized: Vec<u8>,
    line: String,
}

impl<W: Write> HistogramLogWriter<W> {
    /// Writes the header: format version, a comment (e.g. what the values are), StartTime and
    /// BaseTime (both `base_ns`, ns since the UNIX epoch) and the legend. Interval timestamps
    /// are written relative to `base_ns`.
    pub fn new(mut writer: W, base_ns: u64, comment: &str) -> io::Result<Self> {
        let base = seconds_with_millis(base_ns);
        writeln!(writer, "{FORMAT_VERSION_LINE}")?;
        for line in comment.lines() {
            writeln!(writer, "#{line}")?;
        }
        writeln!(
            writer,
            "#[StartTime: {base} (seconds since epoch), {}]",
            rfc3339_utc(base_ns)
        )?;
        writeln!(writer, "#[BaseTime: {base} (seconds since epoch)]")?;
        writeln!(writer, "{LEGEND_LINE}")?;
        Ok(HistogramLogWriter {
            writer,
            base_ns,
            serializer: V2DeflateSerializer::new(),
            serialized: Vec::new(),
            line: String::new(),
        })
    }

    /// Appends one 1-second interval starting at `start_ns` (ns since the UNIX epoch). Empty
    /// histograms are written too, so the time axis has no holes.
    pub fn write_interval(&mut self, start_ns: u64, histogram: &Histogram<u64>) -> io::Result<()> {
        let start = seconds_with_millis(start_ns.saturating_sub(self.base_ns));
        self.write_line(&format!("{start},1.000"), histogram)
    }

    /// Appends one tagged interval of any length (`Tag=<tag>,` before the start, as the
    /// format allows): used for whole-window histograms.
    pub fn write_tagged(
        &mut self,
        tag: &str,
        start_ns: u64,
        length_ns: u64,
        histogram: &Histogram<u64>,
    ) -> io::Result<()> {
        let start = seconds_with_millis(start_ns.saturating_sub(self.base_ns));
        let length = seconds_with_millis(length_ns);
        self.write_line(&format!("Tag={tag},{start},{length}"), histogram)
    }

    /// One interval line: `head` (tag, start, length), the max in ms, the histogram.
    fn write_line(&mut self, head: &str, histogram: &Histogram<u64>) -> io::Result<()> {
        self.serialized.clear();
        self.serializer
            .serialize(histogram, &mut self.serialized)
            .map_err(|e| io::Error::other(format!("cannot compress histogram: {e}")))?;
        self.line.clear();
        self.line
            .push_str(&format!("{head},{:.3},", histogram.max() as f64 / 1e6));
        base64::engine::general_purpose::STANDARD.encode_string(&self.serialized, &mut self.line);
        self.line.push('\n');
        self.writer.write_all(self.line.as_bytes())
    }

    /// Flushes buffered lines to the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use brokerbench_model::new_histogram;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;
    use std::time::Duration;

    const BASE_NS: u64 = 1_795_317_554_250_000_000;

    #[test]
    fn round_trip_through_the_standard_reader() {
        let mut histograms = Vec::new();
        for second in 0..4u64 {
            let mut h = new_histogram();
            if second != 2 {
                for i in 1..=1000 * (second + 1) {
                    h.record(i * 1_000 * (second + 1)).unwrap();
                }
            }
            histograms.push(h);
        }

        let mut out = Vec::new();
        let mut log = HistogramLogWriter::new(&mut out, BASE_NS, "publish latency, ns").unwrap();
        for (second, h) in histograms.iter().enumerate() {
            log.write_interval(BASE_NS + second as u64 * 1_000_000_000, h)
                .unwrap();
        }
        log.flush().unwrap();

        let text = String::from_utf8(out.clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "#[Histogram log format version 1.3]");
        assert_eq!(lines[1], "#publish latency, ns");
        assert_eq!(
            lines[2],
            "#[StartTime: 1795317554.250 (seconds since epoch), 2026-11-22T03:19:14.250Z]"
        );
        assert_eq!(
            lines[3],
            "#[BaseTime: 1795317554.250 (seconds since epoch)]"
        );
        assert_eq!(lines[4], LEGEND_LINE);
        assert!(lines[5].starts_with("0.000,1.000,1.000,"), "{}", lines[5]);
        assert!(lines[7].starts_with("2.000,1.000,0.000,"), "{}", lines[7]);

        let mut deserializer = Deserializer::new();
        let mut read = Vec::new();
        let mut start_time = None;
        let mut base_time = None;
        for entry in IntervalLogIterator::new(&out) {
            match entry.unwrap() {
                LogEntry::StartTime(t) => start_time = Some(t),
                LogEntry::BaseTime(t) => base_time = Some(t),
                LogEntry::Interval(interval) => {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(interval.encoded_histogram())
                        .unwrap();
                    let h: Histogram<u64> =
                        deserializer.deserialize(&mut bytes.as_slice()).unwrap();
                    read.push((
                        interval.start_timestamp(),
                        interval.duration(),
                        interval.max(),
                        h,
                    ));
                }
            }
        }
        let base = Duration::new(1_795_317_554, 250_000_000);
        assert_eq!(start_time, Some(base));
        assert_eq!(base_time, Some(base));
        assert_eq!(read.len(), histograms.len());
        for (second, ((start, length, max, h), original)) in
            read.iter().zip(&histograms).enumerate()
        {
            assert_eq!(*start, Duration::from_secs(second as u64));
            assert_eq!(*length, Duration::from_secs(1));
            assert!((max - original.max() as f64 / 1e6).abs() < 0.001);
            assert_eq!(h.len(), original.len());
            assert_eq!(h.max(), original.max());
            for quantile in [0.5, 0.9, 0.99, 0.999] {
                assert_eq!(
                    h.value_at_quantile(quantile),
                    original.value_at_quantile(quantile)
                );
            }
        }
        assert!(read[2].3.is_empty());
    }
}
