//! One study process per folder, and the signals it forwards to its runs.

use super::*;

/// Keeps two study processes out of one folder.
pub(super) struct Lock(PathBuf);

impl Lock {
    pub(super) fn take(dir: &Path) -> anyhow::Result<Lock> {
        let path = dir.join(LOCK_FILE);
        if let Ok(text) = fs::read_to_string(&path) {
            if let Ok(pid) = text.trim().parse::<u32>() {
                if pid != std::process::id() && Path::new(&format!("/proc/{pid}")).exists() {
                    return Err(BadInput(format!(
                        "{}: another brokerbench study (pid {pid}) is running in this folder",
                        dir.display()
                    ))
                    .into());
                }
            }
        }
        fs::write(&path, std::process::id().to_string())
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(Lock(path))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Counts SIGINT/SIGTERM; the study forwards each to the running run, whose first one ends
/// it with a drain and whose second ends it at once, as for `brokerbench run`.
pub(super) struct Signals {
    pub(super) count: Arc<AtomicUsize>,
}

impl Signals {
    pub(super) fn install() -> anyhow::Result<Signals> {
        let count = Arc::new(AtomicUsize::new(0));
        let mut signals = signal_hook::iterator::Signals::new([
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
        ])?;
        let counter = count.clone();
        std::thread::Builder::new()
            .name("study-signals".into())
            .spawn(move || {
                for _ in signals.forever() {
                    counter.fetch_add(1, Ordering::SeqCst);
                }
            })?;
        Ok(Signals { count })
    }

    pub(super) fn received(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}
