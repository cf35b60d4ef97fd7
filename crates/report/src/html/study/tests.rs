use super::*;

fn search(status: &str) -> Json {
    json!({"cell": 1, "repetition": 1, "status": status, "found_rate": 500000.0,
               "bracket": [500000.0, 800000.0], "steps": [{}, {}, {}]})
}

#[test]
fn a_search_under_way_says_so_and_marks_what_held_so_far() {
    let mut body = String::new();
    found_rates(&[search("running")], &mut body);
    assert!(body.contains("<b>searching</b>"), "{body}");
    assert!(body.contains("3 steps so far"), "{body}");
    assert_eq!(
        search_markers(&search("running"))[0]["label"],
        "held so far 500.0K"
    );

    let mut body = String::new();
    found_rates(&[search("complete")], &mut body);
    assert!(body.contains("<b>500.0K msg/s</b>"), "{body}");
    assert!(!body.contains("so far"), "{body}");
    assert_eq!(
        search_markers(&search("complete"))[0]["label"],
        "found 500.0K"
    );
}
