//! Every YAML file brokerbench reads or writes (workloads, driver files, studies) goes through
//! here, so the library and its settings are chosen once.
//!
//! The parser is `serde-saphyr`: pure Rust with `unsafe` forbidden, duplicate keys and unknown
//! tags rejected with a line and column, alias expansion bounded. Its defaults follow YAML 1.1
//! in places (`yes`, `y`, `on` are booleans; `010` is a number); brokerbench reads YAML 1.2's
//! core schema instead, so a list such as `[x, y]` stays two strings and `0755` stays text.
//!
//! Files are first read into a [`Value`] tree (`--set` overrides and study axes edit it), then
//! deserialized into their types field by field. The tree is `serde_json`'s, built with
//! `preserve_order`, so keys keep the order they were written in (a study's first axis stays
//! first).

use serde::de::DeserializeOwned;
use serde::Serialize;

/// A parsed YAML document.
pub use serde_json::Value;

/// A YAML mapping; its keys keep their written order.
pub type Mapping = serde_json::Map<String, Value>;

/// A YAML text that could not be read, with where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// 1-based line, when the parser knows it.
    pub line: Option<u64>,
    /// 1-based column, when the parser knows it.
    pub column: Option<u64>,
    /// What is wrong, without the position.
    pub message: String,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.line, self.column) {
            (Some(line), Some(column)) => write!(f, "line {line}, column {column}: ")?,
            (Some(line), None) => write!(f, "line {line}: ")?,
            _ => {}
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

fn options() -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    options.leading_zero_numbers_as_strings = true;
    options.underscored_numbers_as_strings = true;
    options.reject_unsupported_tags = true;
    options.with_snippet = false;
    options
}

/// Reads one YAML document into `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    serde_saphyr::from_str_with_options(text, options()).map_err(|e| {
        let location = e.location();
        let mut message = e.without_snippet().to_string();
        if let Some(at) = message.rfind(" at line ") {
            message.truncate(at);
        }
        let message = message
            .replace(
                ", set DuplicateKeyPolicy in Options if acceptable",
                "; each key may appear once",
            )
            .replace(" rejected by the configured policy", " is not allowed");
        Error {
            line: location.map(|l| l.line()),
            column: location.map(|l| l.column()),
            message,
        }
    })
}

/// Writes `value` as a YAML document.
pub fn to_string<T: Serialize>(value: &T) -> Result<String, Error> {
    serde_saphyr::to_string(value).map_err(|e| Error {
        line: None,
        column: None,
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Value {
        from_str(text).unwrap()
    }

    #[test]
    fn core_schema_scalars() {
        assert_eq!(
            read("a: [x, y, yes, on]")["a"],
            serde_json::json!(["x", "y", "yes", "on"])
        );
        assert_eq!(read("a: 0755")["a"], "0755");
        assert_eq!(read("a: 1_000")["a"], "1_000");
        assert_eq!(read("a: true")["a"], true);
        assert_eq!(read("a: 50K")["a"], "50K");
        assert_eq!(read("a: 10")["a"], 10);
        assert_eq!(read("a: 0.5")["a"], 0.5);
        assert_eq!(read("a: ~")["a"], Value::Null);
    }

    #[test]
    fn keys_keep_their_order() {
        let v = read("z: 1\na: 2\nm: 3");
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["z", "a", "m"]);
    }

    #[test]
    fn errors_say_where() {
        let e = from_str::<Value>("rate: 1\nrate: 2").unwrap_err();
        assert_eq!((e.line, e.column), (Some(2), Some(1)));
        assert_eq!(
            e.to_string(),
            "line 2, column 1: duplicate mapping key: rate; each key may appear once"
        );
        let e = from_str::<Value>("topics: [1, 2").unwrap_err();
        assert_eq!(e.to_string(), "line 1, column 9: unclosed bracket '['");
        let e = from_str::<Value>("rate: !custom 5").unwrap_err();
        assert!(e.to_string().contains("unsupported tag `!custom`"), "{e}");
        assert!(e.line == Some(1), "{e:?}");
    }

    #[test]
    fn writes_what_it_reads() {
        let v = read("b: {x: 1, y: [a, '010']}\na: text");
        assert_eq!(read(&to_string(&v).unwrap()), v);
    }
}
