//! Test-only scratch directories: one per test, named by the test and the
//! process, empty when handed out and removed when dropped, so a failing
//! test leaves nothing behind in the temporary directory either.

use std::path::{Path, PathBuf};

pub(crate) struct TestDir(PathBuf);

impl TestDir {
    /// An empty directory `sluice-{name}-{pid}` under the temporary directory.
    pub(crate) fn new(name: &str) -> TestDir {
        let d = std::env::temp_dir().join(format!("sluice-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TestDir(d)
    }
}

impl std::ops::Deref for TestDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
