use super::*;

/// A scheme of tests: `toy://`, `toys://` (TLS), a number after the address kept.
#[derive(Debug)]
struct Toy;

impl Scheme for Toy {
    const TYPE: &'static str = "ToyUrl";
    const PLAIN: &'static [&'static str] = &["toy", "tcp"];
    const SECURE: &'static [&'static str] = &["toys"];
    const PORTS: (u16, u16) = (100, 101);
    const WRITE: &'static str = "write toy://host:port";
    const NO_HOST: &'static str = "no host";
    type Path = Option<u32>;

    fn bad_port(port: &str) -> String {
        format!("bad port {port}")
    }
    fn split(rest: &str) -> Result<(&str, Option<u32>), String> {
        let rest = rest.split('?').next().unwrap_or(rest);
        match rest.split_once('/') {
            Some((a, n)) => Ok((a, Some(n.parse().map_err(|_| format!("bad path {n}"))?))),
            None => Ok((rest, None)),
        }
    }
    fn path_text(path: &Option<u32>) -> String {
        path.map_or(String::new(), |n| format!("/{n}"))
    }
    fn asks_tls(rest: &str) -> bool {
        rest.ends_with("?tls")
    }
}

/// The same with a token for a lone login and a password for the default user.
struct Token;

impl Scheme for Token {
    const TYPE: &'static str = "TokenUrl";
    const PLAIN: &'static [&'static str] = &["t"];
    const SECURE: &'static [&'static str] = &["ts"];
    const PORTS: (u16, u16) = (1, 1);
    const WRITE: &'static str = "write t://host";
    const NO_HOST: &'static str = "no host";
    const ALONE: Alone = Alone::Token;
    const NO_USER: NoUser = NoUser::Password;
    type Path = ();

    fn bad_port(port: &str) -> String {
        format!("bad port {port}")
    }
    fn split(rest: &str) -> Result<(&str, ()), String> {
        Ok((rest.trim_end_matches('/'), ()))
    }
    fn path_text(_path: &()) -> String {
        String::new()
    }
}

fn shown<S: Scheme>(url: &BrokerUrl<S>) -> [String; 3] {
    [
        format!("{url:?}"),
        url.to_string(),
        serde_json::to_string(url).unwrap(),
    ]
}

#[test]
fn a_url_is_read_with_its_schemes_ports_and_path() {
    let u = BrokerUrl::<Toy>::parse("toy://bench:s3cret@h:7/3").unwrap();
    assert_eq!((u.address(), u.path), ("h:7".to_string(), Some(3)));
    assert_eq!(
        (u.user.as_deref(), u.password()),
        (Some("bench"), Some("s3cret"))
    );
    assert!(u.tls.is_none());
    let tls = BrokerUrl::<Toy>::parse("toys://h").unwrap();
    assert_eq!((tls.port, tls.tls.is_some()), (101, true));
    assert_eq!(tls.to_string(), "toys://h:101");
    let asked = BrokerUrl::<Toy>::parse("tcp://h?tls").unwrap();
    assert_eq!(
        (asked.port, asked.tls.is_some()),
        (101, true),
        "TLS by the query"
    );
    assert_eq!(
        BrokerUrl::<Toy>::parse("h").unwrap().to_string(),
        "toy://h:100"
    );
}

#[test]
fn what_is_wrong_with_a_url_is_told_without_its_password() {
    let wrong = BrokerUrl::<Toy>::parse("http://u:s3cret@h").unwrap_err();
    assert!(wrong.ends_with("': write toy://host:port") && !wrong.contains("s3cret"));
    assert_eq!(
        BrokerUrl::<Toy>::parse("toy://h:x").unwrap_err(),
        "bad port x"
    );
    assert_eq!(BrokerUrl::<Toy>::parse("toy://:9").unwrap_err(), "no host");
    assert_eq!(
        BrokerUrl::<Toy>::parse("toy://h/x").unwrap_err(),
        "bad path x"
    );
}

#[test]
fn debug_display_and_serialize_hide_the_password_and_a_token() {
    let u = BrokerUrl::<Toy>::parse("toy://bench:s3cret@h:7/3").unwrap();
    for text in shown(&u) {
        assert!(
            text.contains("toy://bench:***@h:7/3") && !text.contains("s3cret"),
            "{text}"
        );
    }
    assert!(format!("{u:?}").starts_with("ToyUrl("));
    assert_eq!(u.with_secret(), "toy://bench:s3cret@h:7/3");
    let token = BrokerUrl::<Token>::parse("t://s3cret@h").unwrap();
    assert_eq!(token.user.as_deref(), Some("s3cret"));
    for text in shown(&token) {
        assert!(
            text.contains("t://***@h:1") && !text.contains("s3cret"),
            "{text}"
        );
    }
    let alone = BrokerUrl::<Toy>::parse("toy://bench@h").unwrap();
    assert_eq!(
        (alone.user.as_deref(), alone.password()),
        (Some("bench"), None)
    );
    assert_eq!(alone.to_string(), "toy://bench@h:100");
}

#[test]
fn a_password_without_a_user_is_kept_given_to_the_default_user_or_refused() {
    let kept = BrokerUrl::<Toy>::parse("toy://:s3cret@h").unwrap();
    assert_eq!(
        (kept.user.as_deref(), kept.password()),
        (Some(""), Some("s3cret"))
    );
    let default = BrokerUrl::<Token>::parse("t://:s3cret@h").unwrap();
    assert_eq!(
        (default.user.as_deref(), default.password()),
        (None, Some("s3cret"))
    );
    assert_eq!(default.to_string(), "t://:***@h:1");
    let logged = BrokerUrl::<Toy>::parse("toy://h").unwrap();
    let logged = logged.with_login(Some("u".into()), Some("p".into()));
    assert_eq!(logged.to_string(), "toy://u:***@h:100");
    let url = serde_json::from_str::<BrokerUrl<Toy>>("\"toy://u:p@h\"").unwrap();
    assert_eq!(url, logged);
}
