//! Parsing the Prometheus text exposition format (version 0.0.4): one sample per line,
//! `name{label="value",...} value [timestamp]`, comments starting with `#`.

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    /// The value of a label, if present.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses exposition text; lines that are not valid samples are skipped.
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let name = line[..name_end].to_string();
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if rest.starts_with('{') {
        let (parsed, after) = parse_labels(&rest[1..])?;
        labels = parsed;
        rest = after;
    }
    let value_text = rest.split_whitespace().next()?;
    let value = match value_text {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name,
        labels,
        value,
    })
}

/// Parses `k="v",k2="v2"}` (escapes \\, \", \n) and returns the rest after the brace.
fn parse_labels(mut text: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        text = text.trim_start_matches([',', ' ']);
        if let Some(after) = text.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = text.find('=')?;
        let key = text[..eq].trim().to_string();
        text = text[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = text.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        labels.push((key, value));
        text = &text[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_labels_and_special_values() {
        let text = "# HELP x help\n# TYPE x counter\n\
            kafka_server_brokertopicmetrics_count{name=\"MessagesInPerSec\",} 1.5E7\n\
            plain 42\n\
            with_ts{a=\"1\"} 3 1700000000000\n\
            escaped{path=\"a\\\"b\\\\c\",x=\"y\"} +Inf\n\
            broken{a=\"1\" 5\n";
        let s = parse(text);
        assert_eq!(s.len(), 4, "{s:?}");
        assert_eq!(s[0].name, "kafka_server_brokertopicmetrics_count");
        assert_eq!(s[0].label("name"), Some("MessagesInPerSec"));
        assert_eq!(s[0].value, 1.5e7);
        assert_eq!(s[1].labels, vec![]);
        assert_eq!(s[2].value, 3.0);
        assert_eq!(s[3].label("path"), Some("a\"b\\c"));
        assert_eq!(s[3].label("x"), Some("y"));
        assert!(s[3].value.is_infinite());
    }
}
