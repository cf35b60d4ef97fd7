//! Values of the manifest and the summary as text for the page: a field by its dotted path,
//! the strings of an array.

use serde_json::Value as Json;

/// A value of a JSON document by dotted path, as text ("—" when absent).
pub(super) fn text(doc: &Json, path: &str) -> String {
    path.split('.')
        .try_fold(doc, |n, p| n.get(p))
        .filter(|v| !v.is_null())
        .map(|v| {
            v.as_str()
                .map(String::from)
                .unwrap_or_else(|| v.to_string())
        })
        .unwrap_or_else(|| "—".into())
}

/// The strings of a JSON array (none when it is no array).
pub(super) fn strings(value: &Json) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Json::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}
