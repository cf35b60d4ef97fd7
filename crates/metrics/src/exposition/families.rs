//! The metric families to publish and their two renderings: Prometheus text 0.0.4, what
//! every scraper reads, and OpenMetrics 1.0.0, which Prometheus asks for first.

use std::borrow::Cow;
use std::fmt::Write as _;

/// The metric families to publish, rebuilt each interval, typed as Prometheus expects:
/// counters (`…_total`) for everything users `rate()`, summaries for latency quantiles,
/// gauges for levels.
#[derive(Debug, Default, Clone)]
pub struct Exposition {
    families: Vec<Family>,
}

#[derive(Debug, Clone)]
struct Family {
    /// Without the `brokerbench_` prefix; a counter's ends in `_total`.
    name: String,
    help: String,
    kind: Kind,
    /// (name suffix such as `_sum`, labels, value)
    samples: Vec<(&'static str, String, f64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Summary,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Summary => "summary",
        }
    }
}

impl Exposition {
    fn family(&mut self, name: &str, help: &str, kind: Kind) -> &mut Family {
        match self.families.iter().position(|f| f.name == name) {
            Some(i) => &mut self.families[i],
            None => {
                self.families.push(Family {
                    name: name.into(),
                    help: help.into(),
                    kind,
                    samples: Vec::new(),
                });
                self.families.last_mut().expect("just pushed")
            }
        }
    }

    /// Adds a gauge `brokerbench_<name>{labels} value` with its help text.
    pub fn gauge(&mut self, name: &str, help: &str, labels: &str, value: f64) {
        self.family(name, help, Kind::Gauge)
            .samples
            .push(("", labels.into(), value));
    }

    /// Adds a counter; its name ends in `_total`.
    pub fn counter(&mut self, name: &str, help: &str, labels: &str, value: f64) {
        debug_assert!(name.ends_with("_total"), "counter {name}");
        self.family(name, help, Kind::Counter)
            .samples
            .push(("", labels.into(), value));
    }

    /// Adds a summary: quantiles, and the running sum and count of all observations.
    pub fn summary(
        &mut self,
        name: &str,
        help: &str,
        quantiles: &[(f64, f64)],
        sum: f64,
        count: u64,
    ) {
        let family = self.family(name, help, Kind::Summary);
        for (q, v) in quantiles {
            family.samples.push(("", format!("quantile=\"{q}\""), *v));
        }
        family.samples.push(("_sum", String::new(), sum));
        family.samples.push(("_count", String::new(), count as f64));
    }

    /// The Prometheus text format, version 0.0.4: what every scraper reads.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for f in &self.families {
            let help = escape_help(&f.help, false);
            let _ = writeln!(out, "# HELP brokerbench_{} {help}", f.name);
            let _ = writeln!(out, "# TYPE brokerbench_{} {}", f.name, f.kind.as_str());
            f.write_samples(&mut out, &f.name);
        }
        out
    }

    /// The OpenMetrics text format, version 1.0.0, which Prometheus asks for first. It
    /// differs from [`render`](Self::render) where the specification does: a counter
    /// family is named without the `_total` that its sample keeps, help text escapes
    /// quotes, and the body ends with `# EOF`.
    pub fn render_openmetrics(&self) -> String {
        let mut out = String::new();
        for f in &self.families {
            let (family, sample) = match f.kind {
                Kind::Counter => {
                    let family = f.name.strip_suffix("_total").unwrap_or(&f.name);
                    (family, Cow::Owned(format!("{family}_total")))
                }
                Kind::Gauge | Kind::Summary => (f.name.as_str(), Cow::Borrowed(f.name.as_str())),
            };
            let _ = writeln!(out, "# TYPE brokerbench_{family} {}", f.kind.as_str());
            let help = escape_help(&f.help, true);
            let _ = writeln!(out, "# HELP brokerbench_{family} {help}");
            f.write_samples(&mut out, &sample);
        }
        out.push_str("# EOF\n");
        out
    }
}

impl Family {
    fn write_samples(&self, out: &mut String, name: &str) {
        for (suffix, labels, value) in &self.samples {
            let _ = write!(out, "brokerbench_{name}{suffix}");
            if !labels.is_empty() {
                let _ = write!(out, "{{{labels}}}");
            }
            out.push(' ');
            write_value(out, *value);
            out.push('\n');
        }
    }
}

/// Writes a sample value as both formats spell it: `+Inf`, `-Inf` and `NaN` (Rust would
/// write `inf`), and otherwise the shortest digits that read back to the same number, with
/// an exponent where plain digits would run to hundreds of characters.
fn write_value(out: &mut String, value: f64) {
    let _ = if value.is_nan() {
        write!(out, "NaN")
    } else if value.is_infinite() {
        write!(out, "{}", if value > 0.0 { "+Inf" } else { "-Inf" })
    } else if value != 0.0 && !(1e-4..1e16).contains(&value.abs()) {
        write!(out, "{value:e}")
    } else {
        write!(out, "{value}")
    };
}

/// Help text escaped as a `# HELP` line needs: backslash and line feed in both formats,
/// and the double quote too in OpenMetrics.
fn escape_help(help: &str, quotes: bool) -> Cow<'_, str> {
    if !(help.contains(['\\', '\n']) || quotes && help.contains('"')) {
        return Cow::Borrowed(help);
    }
    let mut escaped = String::with_capacity(help.len() + 8);
    for c in help.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '\n' => escaped.push_str("\\n"),
            '"' if quotes => escaped.push_str("\\\""),
            c => escaped.push(c),
        }
    }
    Cow::Owned(escaped)
}
