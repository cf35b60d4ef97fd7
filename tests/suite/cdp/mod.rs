//! Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
//! the browser reads commands from its fd 3 and writes answers and events to its fd 4, each a
//! JSON text ended by a NUL byte), so that a test can watch one page change over real time,
//! which `--dump-dom` cannot.

use std::io::{BufRead, BufReader, PipeReader, PipeWriter, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// One browser with one page.
pub struct Browser {
    child: Child,
    commands: PipeWriter,
    messages: Receiver<Value>,
    /// Events that arrived while a command waited for its answer, for [`Browser::next`].
    events: std::collections::VecDeque<Value>,
    next_id: u64,
    session: String,
    /// Exceptions the page threw and errors it logged, as text.
    pub errors: Vec<String>,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts `chromium` headless with a page of `width`×`height`, scripts' errors watched.
    pub fn start(chromium: &Path, width: u32, height: u32) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let (their_commands, commands) = std::io::pipe().unwrap();
        let (answers, their_answers) = std::io::pipe().unwrap();
        let (r, w) = (their_commands.as_raw_fd(), their_answers.as_raw_fd());
        let mut command = Command::new(chromium);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--remote-debugging-pipe",
            ])
            .arg(format!("--window-size={width},{height}"))
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: between fork and exec only fcntl and dup2, which are async-signal-safe.
        // Both ends are first copied above 10 (closed on exec), so that neither is 3 or 4
        // when moved there (dup2 onto itself would keep close-on-exec).
        unsafe {
            command.pre_exec(move || {
                let (r, w) = (
                    libc::fcntl(r, libc::F_DUPFD_CLOEXEC, 10),
                    libc::fcntl(w, libc::F_DUPFD_CLOEXEC, 10),
                );
                if r < 0 || w < 0 || libc::dup2(r, 3) < 0 || libc::dup2(w, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("chromium starts");
        drop((their_commands, their_answers));
        let mut browser = Browser {
            child,
            commands,
            messages: read_messages(answers),
            events: Default::default(),
            next_id: 0,
            session: String::new(),
            errors: Vec::new(),
            _profile: profile,
        };
        let target = browser.call("Target.createTarget", json!({"url": "about:blank"}));
        let target = target["targetId"].as_str().unwrap().to_string();
        let attached = browser.call(
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
        );
        browser.session = attached["sessionId"].as_str().unwrap().to_string();
        browser.call("Runtime.enable", json!({}));
        browser.call("Page.enable", json!({}));
        browser
    }

    /// Opens `url` and waits (at most 30 s) for its load event.
    pub fn open(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url}));
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(event) = self.next(Duration::from_millis(200)) {
                if event["method"] == "Page.loadEventFired" {
                    return;
                }
            }
        }
        panic!("{url} did not load within 30 s");
    }

    /// The value of the JavaScript expression `expression` in the page.
    pub fn eval(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(result.get("exceptionDetails").is_none(), "{result}");
        result["result"]["value"].clone()
    }

    /// Waits `wait` while the page runs, taking note of its errors.
    pub fn watch(&mut self, wait: Duration) {
        let until = Instant::now() + wait;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            self.next(left);
        }
    }

    /// A PNG of the page as it is now, written to `path`.
    pub fn screenshot(&mut self, path: &Path) {
        let shot = self.call("Page.captureScreenshot", json!({"format": "png"}));
        use base64::Engine as _;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        std::fs::write(path, png).unwrap();
    }

    /// Sends a command (to the page's session once attached) and waits for its answer.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        let mut bytes = message.to_string().into_bytes();
        bytes.push(0);
        self.commands.write_all(&bytes).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.checked_duration_since(Instant::now());
            let left = left.unwrap_or_else(|| panic!("no answer to {method} within 30 s"));
            let message = self
                .receive(left)
                .unwrap_or_else(|| panic!("no answer to {method} within 30 s"));
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
            if message.get("method").is_some() {
                self.events.push_back(message);
            }
        }
    }

    /// The next event (one kept while a command waited first) within `wait`.
    fn next(&mut self, wait: Duration) -> Option<Value> {
        match self.events.pop_front() {
            Some(event) => Some(event),
            None => self.receive(wait),
        }
    }

    /// The next message from the browser within `wait`; an error the page reports is noted
    /// on the way. A browser that has gone is a failure, not a wait.
    fn receive(&mut self, wait: Duration) -> Option<Value> {
        let message = match self.messages.recv_timeout(wait) {
            Ok(message) => message,
            Err(RecvTimeoutError::Timeout) => return None,
            Err(RecvTimeoutError::Disconnected) => {
                panic!("chromium ended: {:?}", self.child.try_wait())
            }
        };
        match message["method"].as_str() {
            Some("Runtime.exceptionThrown") => self
                .errors
                .push(message["params"]["exceptionDetails"].to_string()),
            Some("Runtime.consoleAPICalled") if message["params"]["type"] == "error" => {
                self.errors.push(message["params"]["args"].to_string())
            }
            _ => {}
        }
        Some(message)
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A thread that splits what the browser writes at each NUL into JSON messages.
fn read_messages(answers: PipeReader) -> Receiver<Value> {
    let (send, receive) = channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(answers);
        let mut message = Vec::new();
        while matches!(reader.read_until(0, &mut message), Ok(n) if n > 0) {
            message.pop_if(|b| *b == 0);
            if let Ok(value) = serde_json::from_slice(&message) {
                if send.send(value).is_err() {
                    return;
                }
            }
            message.clear();
        }
    });
    receive
}
