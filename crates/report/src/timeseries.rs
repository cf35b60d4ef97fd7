//! timeseries.csv: one row per second of the run (warm-up, measurement and drain), over all
//! producers and consumers. The columns are stable; add new ones at the end only.
//!
//! | column | meaning |
//! | --- | --- |
//! | `second` | index of the second since the run started (0 = first second of warm-up) |
//! | `phase` | `warmup`, `measurement` or `drain` at the start of the second |
//! | `time_s` | start of the second, seconds since the UNIX epoch with milliseconds |
//! | `sent` | messages handed to the client library in the second |
//! | `acknowledged` | messages acknowledged by the broker in the second |
//! | `failed` | messages whose send or acknowledgement failed in the second |
//! | `received` | messages received by consumers in the second (every copy counts) |
//! | `bytes_acknowledged` | payload bytes acknowledged in the second |
//! | `bytes_received` | payload bytes received in the second |
//! | `backlog` | messages acknowledged so far less those received so far; empty without consumers |
//! | `acknowledged_rate_1m` | Kafka-style one-minute exponentially weighted acknowledged rate, msg/s, 2 decimals |
//! | `publish_p50_us`, `publish_p99_us`, `publish_max_us` | publish latency (ack time − intended send time) of the acknowledgements in the second, µs with 1 decimal; empty when none |
//! | `e2e_p50_us`, `e2e_p99_us`, `e2e_max_us` | end-to-end latency (receive time − intended send time) of the messages received in the second, µs with 1 decimal; empty when none |
//! | `schedule_lag_max_us` | largest schedule lag (actual − intended send time) in the second, µs with 1 decimal |
//! | `disconnected_producers` | producers whose client had lost the broker at some time in the second (an outage) |
//! | `faults` | the workload's faults under way at some time in the second, by number from 1, space-separated (`1`, `1 2`); empty when none |
//! | `blocked_producers` | producers whose publishing the broker blocked at some time in the second (RabbitMQ's `connection.blocked`) |

use std::io::{self, Write};

use brokerbench_model::IntervalRow;
use hdrhistogram::Histogram;

use crate::time::seconds_with_millis;

/// Columns of timeseries.csv, in order; see the module documentation for their meaning.
pub const TIMESERIES_COLUMNS: &[&str] = &[
    "second",
    "phase",
    "time_s",
    "sent",
    "acknowledged",
    "failed",
    "received",
    "bytes_acknowledged",
    "bytes_received",
    "backlog",
    "acknowledged_rate_1m",
    "publish_p50_us",
    "publish_p99_us",
    "publish_max_us",
    "e2e_p50_us",
    "e2e_p99_us",
    "e2e_max_us",
    "schedule_lag_max_us",
    "disconnected_producers",
    "faults",
    "blocked_producers",
];

/// Writes timeseries.csv rows to any writer with the `csv` crate; the header is written on
/// creation.
pub struct TimeseriesWriter<W: Write> {
    writer: csv::Writer<W>,
    row: Vec<String>,
}

impl<W: Write> TimeseriesWriter<W> {
    /// Writes the header line and returns a writer for the rows.
    pub fn new(writer: W) -> io::Result<Self> {
        let mut writer = csv::Writer::from_writer(writer);
        writer.write_record(TIMESERIES_COLUMNS)?;
        Ok(TimeseriesWriter {
            writer,
            row: Vec::with_capacity(TIMESERIES_COLUMNS.len()),
        })
    }

    /// Appends the row for one second, no fault under way in it.
    pub fn write_row(&mut self, row: &IntervalRow) -> io::Result<()> {
        self.write_marked_row(row, "")
    }

    /// Appends the row for one second with the faults under way in it (`1 2`).
    pub fn write_marked_row(&mut self, row: &IntervalRow, faults: &str) -> io::Result<()> {
        self.row.clear();
        cells(row, &mut self.row);
        self.row.push(faults.to_string());
        self.row.push(row.blocked_producers.to_string());
        Ok(self.writer.write_record(&self.row)?)
    }

    /// Flushes buffered rows to the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

fn micros(nanos: u64) -> String {
    format!("{:.1}", nanos as f64 / 1e3)
}

/// p50, p99 and max of a histogram in µs, or three empty cells when it is empty.
fn latency_cells(histogram: &Histogram<u64>, cells: &mut Vec<String>) {
    if histogram.is_empty() {
        cells.extend(std::iter::repeat_n(String::new(), 3));
    } else {
        cells.push(micros(histogram.value_at_quantile(0.50)));
        cells.push(micros(histogram.value_at_quantile(0.99)));
        cells.push(micros(histogram.max()));
    }
}

fn cells(row: &IntervalRow, cells: &mut Vec<String>) {
    cells.extend([
        row.second.to_string(),
        row.phase.as_str().to_string(),
        seconds_with_millis(row.start_ns),
        row.sent.to_string(),
        row.acknowledged.to_string(),
        row.failed.to_string(),
        row.received.to_string(),
        row.bytes_acknowledged.to_string(),
        row.bytes_received.to_string(),
        row.backlog.map(|b| b.to_string()).unwrap_or_default(),
        format!("{:.2}", row.acknowledged_rate_1m),
    ]);
    latency_cells(&row.publish, cells);
    latency_cells(&row.end_to_end, cells);
    cells.push(micros(row.schedule_lag_max_ns));
    cells.push(row.disconnected_producers.to_string());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::row;

    #[test]
    fn header_and_rows() {
        let mut out = Vec::new();
        let mut writer = TimeseriesWriter::new(&mut out).unwrap();
        let mut first = row(0, 1_795_317_554_250_000_000);
        first.backlog = None;
        writer.write_row(&first).unwrap();
        let mut second = row(1, 1_795_317_555_250_000_000);
        for nanos in [1_000_000, 2_000_000, 3_000_000] {
            second.publish.record(nanos).unwrap();
        }
        second.end_to_end.record(1_234_567).unwrap();
        writer.write_marked_row(&second, "1 2").unwrap();
        writer.flush().unwrap();
        drop(writer);

        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], TIMESERIES_COLUMNS.join(","));
        assert_eq!(
            lines[1],
            "0,measurement,1795317554.250,100,90,1,80,9000,8000,,12.50,,,,,,,2.5,0,,0"
        );
        let cells: Vec<&str> = lines[2].split(',').collect();
        assert_eq!(cells.len(), TIMESERIES_COLUMNS.len());
        assert_eq!(cells[9], "10");
        // Histogram values keep 3 significant digits: 2 ms reads back as 2,000,xxx ns.
        let p50_us: f64 = cells[11].parse().unwrap();
        let max_us: f64 = cells[13].parse().unwrap();
        let e2e_p50_us: f64 = cells[14].parse().unwrap();
        assert!((2000.0..2002.0).contains(&p50_us), "{}", lines[2]);
        assert!((3000.0..3004.0).contains(&max_us), "{}", lines[2]);
        assert!((1234.0..1236.0).contains(&e2e_p50_us), "{}", lines[2]);
        assert_eq!(cells[17], "2.5");
        assert_eq!(cells[19], "1 2");
    }
}
