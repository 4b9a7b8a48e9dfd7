//! Helpers the model's unit tests share (the model's own and the keyed copy's): a file put
//! in place under a test vault, and a wait past the racy window.

use std::path::Path;

/// Writes `text` at `rel` under `root`, making its folders.
pub(crate) fn put(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("folder");
    std::fs::write(path, text).expect("write");
}

/// Past the racy window, so every file written so far reads as settled.
pub(crate) fn settle() {
    std::thread::sleep(std::time::Duration::from_millis(40));
}
