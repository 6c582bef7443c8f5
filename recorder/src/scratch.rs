//! Scratch folders in the system's temporary folder that outlive no process: each is named
//! after the process that made it, and the folders of processes that are gone are removed when
//! the next one is made.

/// A fresh folder in the system's temporary folder (`TMPDIR`), named `{prefix}{pid}-...`, made
/// after removing the folders of that prefix whose process is gone. A run stopped by a signal
/// (Ctrl-C, a kill) runs no destructor, and its folder (the embedded engine's kept tables, an
/// executor's shuffle output: gigabytes on a large store) would otherwise stay for good.
pub fn scratch_folder(prefix: &str) -> std::io::Result<tempfile::TempDir> {
    // An hour's grace: a folder whose owner this process cannot see (another PID namespace
    // sharing the folder) is left alone while it is in use.
    sweep_abandoned(
        &std::env::temp_dir(),
        prefix,
        std::time::Duration::from_secs(3600),
    );
    tempfile::Builder::new()
        .prefix(&format!("{prefix}{}-", std::process::id()))
        .tempdir()
}

/// Remove the folders in `dir` named `{prefix}{pid}-...` whose process is not running and that
/// have not changed for `grace`. Errors (a folder of another user) leave a folder as it is.
pub fn sweep_abandoned(dir: &std::path::Path, prefix: &str, grace: std::time::Duration) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix(prefix))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let idle = entry
            .metadata()
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|idle| idle >= grace);
        if idle && !process_is_running(pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Whether process `pid` runs (Linux: it has a `/proc` entry). Elsewhere every process
/// counts as running, so nothing is removed.
fn process_is_running(pid: u32) -> bool {
    !cfg!(target_os = "linux") || std::path::Path::new("/proc").join(pid.to_string()).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_of_processes_that_are_gone_are_swept_and_others_kept() {
        let base = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let prefix = "chainweaver-test-";
        let folder = |name: String| {
            let path = base.path().join(name);
            std::fs::create_dir_all(path.join("table-0")).unwrap();
            std::fs::write(path.join("table-0").join("part.arrow"), b"rows").unwrap();
            path
        };
        let abandoned = folder(format!("{prefix}{gone}-abc"));
        let running = folder(format!("{prefix}{}-def", std::process::id()));
        let unrelated = folder(format!("other-{gone}-ghi"));
        let unnumbered = folder(format!("{prefix}ghi"));

        // Within the grace period nothing goes.
        sweep_abandoned(base.path(), prefix, std::time::Duration::from_secs(3600));
        assert!(abandoned.exists());

        sweep_abandoned(base.path(), prefix, std::time::Duration::ZERO);
        assert!(!abandoned.exists());
        assert!(running.exists() && unrelated.exists() && unnumbered.exists());
    }
}
