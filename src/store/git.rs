//! The `git` binary, driven through its plumbing: the one place the engine runs git
//! (replication, docs/replication.md).
//!
//! Every call runs `git` in the vault's root with the caller's environment cleaned of the
//! variables that would point it at another repository or index (`GIT_DIR`, `GIT_WORK_TREE`,
//! `GIT_INDEX_FILE`, …), with prompts off (`GIT_TERMINAL_PROMPT=0`: an unreachable or
//! password-protected remote fails instead of waiting for a person who is not there) and in
//! the C locale. Paths are passed after `--` and read back NUL-separated (`-z`), so no name is
//! ever quoted or split. Git ≥ 2.38 is required (`merge-tree --write-tree`); `version` checks.
//!
//! Why the binary and not a crate: libgit2 (git2) has no merge-ort and no reftable, gix has no
//! push; the binary is what every user's remote already speaks (ssh, https, git://, file).
//! Reads are few and small per replication (a handful of blobs), so in-process object reads
//! would save milliseconds, not change a figure.

use std::ffi::OsStr;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Error, Result};

/// The oldest git that has everything used here (`merge-tree --write-tree`, 2.38).
pub const MIN_VERSION: (u32, u32) = (2, 38);

/// Environment variables that would make git act on another repository, index or config.
const CLEARED_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
];

/// What one git call produced.
#[derive(Debug)]
pub struct Output {
    pub status: std::process::ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Output {
    /// stdout as text, trimmed of the final newline.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).trim_end_matches('\n').to_string()
    }
}

/// An author or committer.
#[derive(Debug, Clone)]
pub struct Person {
    pub name: String,
    pub email: String,
    /// RFC 3339 (git accepts it as a date).
    pub date: String,
}

/// A repository whose work tree is a vault.
#[derive(Debug, Clone)]
pub struct Git {
    root: PathBuf,
    /// Environment kept for every call: a `pre-receive` hook's quarantine (the pushed objects
    /// are visible only through it).
    kept_env: Vec<(String, std::ffi::OsString)>,
}

impl Git {
    /// The repository at the vault's root (which may not exist yet: `init`).
    pub fn at(root: &Path) -> Self {
        Git { root: std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf()), kept_env: Vec::new() }
    }

    /// The repository a `pre-receive` hook runs in: the pushed objects wait in a quarantine
    /// that git names in the hook's environment, so those variables are passed on.
    pub fn in_hook(repository: &Path) -> Self {
        let kept_env = ["GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_QUARANTINE_PATH"]
            .iter()
            .filter_map(|name| std::env::var_os(name).map(|v| ((*name).to_string(), v)))
            .collect();
        Git { kept_env, ..Git::at(repository) }
    }

    /// The vault root (git's work tree).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether the vault's root is a git work tree's top (a `.git` folder or file there).
    pub fn is_repository(&self) -> bool {
        std::fs::symlink_metadata(self.root.join(".git")).is_ok()
    }

    /// The installed git's version, refused (typed) when absent or older than `MIN_VERSION`.
    pub fn version() -> Result<(u32, u32, u32)> {
        let output = Command::new("git")
            .arg("--version")
            .env("LC_ALL", "C")
            .output()
            .map_err(|e| Error::GitUnavailable { reason: format!("the `git` program could not be run ({e}); install git ≥ 2.38") })?;
        let text = String::from_utf8_lossy(&output.stdout);
        let version = parse_version(&text)
            .ok_or_else(|| Error::GitUnavailable { reason: format!("`git --version` said '{}', which is not a version", text.trim()) })?;
        if (version.0, version.1) < MIN_VERSION {
            return Err(Error::GitUnavailable {
                reason: format!(
                    "git {}.{}.{} is older than {}.{} (merge-tree --write-tree is needed); install a newer git",
                    version.0, version.1, version.2, MIN_VERSION.0, MIN_VERSION.1
                ),
            });
        }
        Ok(version)
    }

    fn command(&self) -> Command {
        let mut command = Command::new("git");
        command.current_dir(&self.root);
        for name in CLEARED_ENV {
            command.env_remove(name);
        }
        for (name, value) in &self.kept_env {
            command.env(name, value);
        }
        command
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("LC_ALL", "C")
            .env("GIT_OPTIONAL_LOCKS", "0")
            // An ssh remote never asks for a password on a terminal nobody watches.
            .env("GIT_SSH_COMMAND", std::env::var("GIT_SSH_COMMAND").unwrap_or_else(|_| "ssh -o BatchMode=yes".to_string()))
            .args(["-c", "core.quotePath=false", "-c", "advice.detachedHead=false"]);
        command
    }

    /// Runs `git <args>` and returns what it printed, whatever its exit status.
    pub fn output<I, S>(&self, args: I, env: &[(&str, &str)], stdin: Option<&[u8]>) -> Result<Output>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = self.command();
        command.args(args);
        for (k, v) in env {
            command.env(k, v);
        }
        command.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() }).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child =
            command.spawn().map_err(|e| Error::GitUnavailable { reason: format!("the `git` program could not be run ({e})") })?;
        let pipe = stdin.map(|bytes| (child.stdin.take().expect("piped"), bytes));
        // The input is written while the output is read: a git that answers as it reads
        // (`hash-object --stdin-paths` over a whole vault) would otherwise fill its output pipe
        // and wait for us while we wait for it.
        let output = std::thread::scope(|scope| {
            if let Some((mut pipe, bytes)) = pipe {
                // A git that exits early closes the pipe; its status says why.
                scope.spawn(move || {
                    let _ = pipe.write_all(bytes);
                });
            }
            child.wait_with_output()
        })
        .map_err(|e| Error::Replication { step: "git", reason: e.to_string() })?;
        Ok(Output { status: output.status, stdout: output.stdout, stderr: String::from_utf8_lossy(&output.stderr).trim().to_string() })
    }

    /// `output` for a call that talks to a remote (ls-remote, fetch, push): stopped after
    /// `timeout` (a partition or a silent peer never hangs the caller), which is then a
    /// `replication_failed` error naming `step`. Its output is read while it runs, so a large
    /// one never blocks it.
    pub fn network_output<I, S>(&self, step: &'static str, args: I, timeout: std::time::Duration) -> Result<Output>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        use std::io::Read as _;
        use wait_timeout::ChildExt as _;
        let mut command = self.command();
        command.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child =
            command.spawn().map_err(|e| Error::GitUnavailable { reason: format!("the `git` program could not be run ({e})") })?;
        let read = |mut pipe: Box<dyn std::io::Read + Send>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = pipe.read_to_end(&mut bytes);
                bytes
            })
        };
        let stdout = read(Box::new(child.stdout.take().expect("piped")));
        let stderr = read(Box::new(child.stderr.take().expect("piped")));
        let waited = child.wait_timeout(timeout).map_err(|e| Error::Replication { step, reason: e.to_string() })?;
        let Some(status) = waited else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::Replication {
                step,
                reason: format!(
                    "the remote did not answer within {} s (policy replication.network_timeout_s); the next run goes on from here",
                    timeout.as_secs()
                ),
            });
        };
        let stdout = stdout.join().unwrap_or_default();
        let stderr = String::from_utf8_lossy(&stderr.join().unwrap_or_default()).trim().to_string();
        Ok(Output { status, stdout, stderr })
    }

    /// Runs `git <args>`; a non-zero exit is a `replication_failed` error naming `step`.
    pub fn run<I, S>(&self, step: &'static str, args: I) -> Result<Output>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.run_with(step, args, &[], None)
    }

    /// `run` with extra environment and standard input.
    pub fn run_with<I, S>(&self, step: &'static str, args: I, env: &[(&str, &str)], stdin: Option<&[u8]>) -> Result<Output>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let output = self.output(args, env, stdin)?;
        if !output.status.success() {
            return Err(Error::Replication { step, reason: first_lines(&output.stderr) });
        }
        Ok(output)
    }

    /// The commit a revision names, `None` when it names none (an unborn branch).
    pub fn resolve(&self, revision: &str) -> Result<Option<String>> {
        let output = self.output(["rev-parse", "--verify", "-q", &format!("{revision}^{{commit}}")], &[], None)?;
        Ok(output.status.success().then(|| output.text()))
    }

    /// The branch `HEAD` is on (`refs/heads/<name>`); a detached `HEAD` is refused.
    pub fn branch(&self) -> Result<String> {
        let output = self.output(["symbolic-ref", "-q", "HEAD"], &[], None)?;
        let name = output.text();
        match name.strip_prefix("refs/heads/") {
            Some(branch) if output.status.success() => Ok(branch.to_string()),
            _ => Err(Error::Replication {
                step: "branch",
                reason: "HEAD is detached (no branch is checked out); check out the vault's branch first".into(),
            }),
        }
    }

    /// Whether `ancestor` is an ancestor of (or equal to) `descendant`.
    pub fn is_ancestor(&self, ancestor: &str, descendant: &str) -> Result<bool> {
        let output = self.output(["merge-base", "--is-ancestor", ancestor, descendant], &[], None)?;
        match output.status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(Error::Replication { step: "merge-base", reason: first_lines(&output.stderr) }),
        }
    }

    /// A blob's bytes at `revision:path`, `None` when the path is not in that tree.
    pub fn blob_at(&self, revision: &str, path: &str) -> Result<Option<Vec<u8>>> {
        let output = self.output(["cat-file", "blob", &format!("{revision}:{path}")], &[], None)?;
        Ok(output.status.success().then_some(output.stdout))
    }

    /// The bytes of blob `object`, `None` when there is no such blob.
    pub fn blob(&self, object: &str) -> Result<Option<Vec<u8>>> {
        let output = self.output(["cat-file", "blob", object], &[], None)?;
        Ok(output.status.success().then_some(output.stdout))
    }

    /// The blob ids and modes of `paths` in `revision`'s tree (absent paths are left out).
    pub fn tree_entries(&self, revision: &str, paths: &[String]) -> Result<std::collections::BTreeMap<String, (String, String)>> {
        let mut out = std::collections::BTreeMap::new();
        if paths.is_empty() {
            return Ok(out);
        }
        let mut args: Vec<String> = vec!["ls-tree".into(), "-z".into(), "--full-tree".into(), revision.into(), "--".into()];
        args.extend(paths.iter().cloned());
        let output = self.run("ls-tree", &args)?;
        for record in output.stdout.split(|&b| b == 0).filter(|r| !r.is_empty()) {
            let record = String::from_utf8_lossy(record);
            let Some((head, path)) = record.split_once('\t') else { continue };
            let mut parts = head.split(' ');
            let (Some(mode), Some(_kind), Some(id)) = (parts.next(), parts.next(), parts.next()) else { continue };
            out.insert(path.to_string(), (mode.to_string(), id.to_string()));
        }
        Ok(out)
    }

    /// What `revision`'s tree holds below each of `folders` (`""` is the root): its direct
    /// entries, each with whether it is a folder (a tree), or with `recursive` every file in
    /// it at any depth (none a folder). A folder the tree does not hold lists nothing.
    /// O(the entries listed).
    pub fn tree_listing(&self, revision: &str, folders: &[String], recursive: bool) -> Result<std::collections::BTreeMap<String, bool>> {
        let mut out = std::collections::BTreeMap::new();
        let (root, below): (Vec<&String>, Vec<&String>) = folders.iter().partition(|f| f.is_empty());
        let mut runs: Vec<Vec<String>> = Vec::new();
        if !root.is_empty() {
            runs.push(Vec::new());
        }
        if !below.is_empty() {
            runs.push(below.iter().map(|f| format!("{f}/")).collect());
        }
        for paths in runs {
            let mut args: Vec<String> = vec!["--literal-pathspecs".into(), "ls-tree".into(), "-z".into(), "--full-tree".into()];
            if recursive {
                args.push("-r".into());
            }
            args.push(revision.into());
            if !paths.is_empty() {
                args.push("--".into());
                args.extend(paths);
            }
            let output = self.run("ls-tree", &args)?;
            for record in output.stdout.split(|&b| b == 0).filter(|r| !r.is_empty()) {
                let record = String::from_utf8_lossy(record);
                let Some((head, path)) = record.split_once('\t') else { continue };
                out.insert(path.to_string(), head.split(' ').nth(1) == Some("tree"));
            }
        }
        Ok(out)
    }

    /// Among `paths` (plain vault-relative file paths), those whose work-tree state differs
    /// from `commit`'s tree (`None`: an unborn branch, where every present file differs):
    /// content (hashed as `git add` would, clean filters applied), a file present on one side
    /// only, a file replaced by anything else. Untracked files git ignores are left out, as
    /// `git status` leaves them out. Unlike `dirty_paths` it never reads the index: `ls-tree`
    /// reads the trees along the paths and `hash-object` the files, O(paths) at any vault size.
    pub fn changed_against(&self, root: &Path, commit: Option<&str>, paths: &[String]) -> Result<Vec<String>> {
        let committed = match commit {
            Some(commit) => self.tree_entries(commit, paths)?,
            None => std::collections::BTreeMap::new(),
        };
        let mut present = Vec::new();
        let mut changed = Vec::new();
        for path in paths {
            match std::fs::symlink_metadata(root.join(path)) {
                Ok(meta) if meta.is_file() => present.push(path.clone()),
                // Gone, or no longer a plain file: differs when the commit holds it.
                Ok(_) | Err(_) if committed.contains_key(path) => changed.push(path.clone()),
                Ok(meta) if !meta.is_dir() => changed.push(path.clone()),
                _ => {}
            }
        }
        if !present.is_empty() {
            let input: Vec<u8> = present.iter().flat_map(|p| p.bytes().chain(std::iter::once(b'\n'))).collect();
            let hashed = self.run_with("hash-object", ["hash-object", "--stdin-paths"], &[], Some(&input))?;
            let ids: Vec<String> = hashed.text().lines().map(str::to_string).collect();
            if ids.len() != present.len() {
                return Err(Error::Replication { step: "hash-object", reason: "git hashed a different number of files".into() });
            }
            let mut untracked = Vec::new();
            for (path, id) in present.into_iter().zip(ids) {
                match committed.get(&path) {
                    Some((mode, blob)) if blob == &id && mode != "120000" => {}
                    Some(_) => changed.push(path),
                    None => untracked.push(path),
                }
            }
            if !untracked.is_empty() {
                let input: Vec<u8> = untracked.iter().flat_map(|p| p.bytes().chain(std::iter::once(0))).collect();
                // Exit 1 = none is ignored; the ignored ones are printed.
                let checked = self.output(["check-ignore", "--no-index", "-z", "--stdin"], &[], Some(&input))?;
                let ignored: std::collections::BTreeSet<String> =
                    checked.stdout.split(|&b| b == 0).filter(|r| !r.is_empty()).map(|r| String::from_utf8_lossy(r).into_owned()).collect();
                changed.extend(untracked.into_iter().filter(|p| !ignored.contains(p)));
            }
        }
        changed.sort();
        changed.dedup();
        Ok(changed)
    }

    /// Stages exactly `paths` from the work tree into `index` (the repository's own index when
    /// `None`): present files are hashed and added, missing ones removed. O(paths) hashed, but
    /// git reads and rewrites the whole index file.
    pub fn stage(&self, index: Option<&Path>, paths: &[String]) -> Result<()> {
        if paths.is_empty() {
            return Ok(());
        }
        let mut input = Vec::new();
        for path in paths {
            input.extend_from_slice(path.as_bytes());
            input.push(0);
        }
        let env = index_env(index);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.run_with("update-index", ["update-index", "--add", "--remove", "-z", "--stdin"], &env, Some(&input))?;
        Ok(())
    }

    /// The entries `paths` (plain vault-relative file paths) would have in a commit of the work
    /// tree as it is now, their blobs written to the object store: a regular file is hashed as
    /// `git add` hashes it (clean filters applied; `100755` when executable and git trusts the
    /// executable bit), a symbolic link as its target (`120000`); anything else — gone, a
    /// folder, beyond a symbolic link — is `None`, a removal. One `hash-object` for all the
    /// files. O(paths).
    pub fn work_tree_entries(&self, root: &Path, paths: &[String]) -> Result<std::collections::BTreeMap<String, Option<(String, String)>>> {
        let mut out = std::collections::BTreeMap::new();
        let mut files: Vec<(String, &'static str)> = Vec::new();
        let mut links: Vec<(String, Vec<u8>)> = Vec::new();
        let mut plain_dirs: std::collections::BTreeMap<String, bool> = std::collections::BTreeMap::new();
        let trust_executable = self.trusts_executable_bit()?;
        for path in paths {
            check_tree_path(path)?;
            // A path beneath a symbolic link (or a file) is not in the work tree, as git sees it.
            let mut beneath_plain_dirs = true;
            let mut at = 0;
            while let Some(slash) = path[at..].find('/') {
                let dir = &path[..at + slash];
                let plain = *plain_dirs
                    .entry(dir.to_string())
                    .or_insert_with(|| std::fs::symlink_metadata(root.join(dir)).is_ok_and(|m| m.is_dir()));
                if !plain {
                    beneath_plain_dirs = false;
                    break;
                }
                at += slash + 1;
            }
            let meta = if beneath_plain_dirs { std::fs::symlink_metadata(root.join(path)).ok() } else { None };
            match meta {
                Some(meta) if meta.is_file() => {
                    use std::os::unix::fs::PermissionsExt as _;
                    let executable = trust_executable && meta.permissions().mode() & 0o100 != 0;
                    files.push((path.clone(), if executable { "100755" } else { "100644" }));
                }
                Some(meta) if meta.file_type().is_symlink() => {
                    use std::os::unix::ffi::OsStrExt as _;
                    let target = std::fs::read_link(root.join(path)).map_err(|e| Error::io("reading the link", path.clone(), e))?;
                    links.push((path.clone(), target.as_os_str().as_bytes().to_vec()));
                }
                _ => {
                    out.insert(path.clone(), None);
                }
            }
        }
        if !files.is_empty() {
            let input: Vec<u8> = files.iter().flat_map(|(p, _)| p.bytes().chain(std::iter::once(b'\n'))).collect();
            let hashed = self.run_with("hash-object", ["hash-object", "-w", "--stdin-paths"], &[], Some(&input))?;
            let ids: Vec<String> = hashed.text().lines().map(str::to_string).collect();
            if ids.len() != files.len() {
                return Err(Error::Replication { step: "hash-object", reason: "git hashed a different number of files".into() });
            }
            for ((path, mode), id) in files.into_iter().zip(ids) {
                out.insert(path, Some((mode.to_string(), id)));
            }
        }
        for (path, target) in links {
            let id = self.run_with("hash-object", ["hash-object", "-w", "--no-filters", "--stdin"], &[], Some(&target))?.text();
            out.insert(path, Some(("120000".to_string(), id)));
        }
        Ok(out)
    }

    /// Whether git records the executable bit (`core.fileMode`, true unless set false), asked
    /// once per repository per process.
    fn trusts_executable_bit(&self) -> Result<bool> {
        static KNOWN: std::sync::Mutex<Vec<(PathBuf, bool)>> = std::sync::Mutex::new(Vec::new());
        let mut known = KNOWN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, trusted)) = known.iter().find(|(root, _)| root == &self.root) {
            return Ok(*trusted);
        }
        // Exit 1: not set (git's default, true).
        let output = self.output(["config", "--type=bool", "--get", "core.fileMode"], &[], None)?;
        let trusted = output.text() != "false";
        known.push((self.root.clone(), trusted));
        Ok(trusted)
    }

    /// Writes the tree of `base` (a commit or tree; `None`: the empty tree) with `changes`
    /// applied — each path's new (mode, object), or `None` to remove it — and returns its id.
    /// Only the trees on the changed paths' folder chains are read (one `cat-file --batch`)
    /// and written (one `mktree --batch`, bottom-up): O(change) at any repository size, never
    /// an index. A folder left empty disappears; a file may become a folder and back.
    pub fn tree_with(&self, base: Option<&str>, changes: &std::collections::BTreeMap<String, Option<(String, String)>>) -> Result<String> {
        use std::collections::{BTreeMap, BTreeSet};
        type Entries = BTreeMap<Vec<u8>, (String, String)>;
        // Every folder on a changed path's chain ("" is the root).
        let mut dirs: BTreeSet<String> = BTreeSet::from([String::new()]);
        for path in changes.keys() {
            check_tree_path(path)?;
            let mut at = 0;
            while let Some(slash) = path[at..].find('/') {
                dirs.insert(path[..at + slash].to_string());
                at += slash + 1;
            }
        }
        // Their entries in `base`, read raw.
        let mut trees: BTreeMap<String, Entries> = dirs.iter().map(|d| (d.clone(), Entries::new())).collect();
        if let Some(base) = base {
            let input: Vec<u8> = dirs.iter().flat_map(|d| format!("{base}:{d}\n").into_bytes()).collect();
            let output = self.run_with("cat-file", ["cat-file", "--batch"], &[], Some(&input))?;
            let mut rest: &[u8] = &output.stdout;
            for dir in &dirs {
                let line_end = rest.iter().position(|&b| b == b'\n').ok_or_else(|| truncated("cat-file"))?;
                let header = String::from_utf8_lossy(&rest[..line_end]).into_owned();
                rest = &rest[line_end + 1..];
                let fields: Vec<&str> = header.split(' ').collect();
                let [id, kind, size] = fields[..] else { continue }; // "<name> missing": not in base
                let size: usize = size.parse().map_err(|_| truncated("cat-file"))?;
                if rest.len() < size + 1 {
                    return Err(truncated("cat-file"));
                }
                let (body, after) = rest.split_at(size);
                rest = &after[1..];
                if kind == "tree" {
                    trees.insert(dir.clone(), parse_tree(body, id.len() / 2)?);
                }
                // A blob where a folder is now: the folder starts empty.
            }
        }
        // The files' changes, in their folders.
        let mut set_by_change: BTreeSet<(String, Vec<u8>)> = BTreeSet::new();
        for (path, entry) in changes {
            let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
            let entries = trees.get_mut(dir).expect("every changed path's folder is read");
            match entry {
                Some((mode, id)) => {
                    entries.insert(name.as_bytes().to_vec(), (mode.clone(), id.clone()));
                    set_by_change.insert((dir.to_string(), name.as_bytes().to_vec()));
                }
                None => {
                    // Only a file is removed here; a folder of that name goes when it empties.
                    if entries.get(name.as_bytes()).is_some_and(|(mode, _)| mode != "040000") {
                        entries.remove(name.as_bytes());
                    }
                }
            }
        }
        // Bottom-up: the deepest folders first, each written and placed in its parent.
        let mut order: Vec<String> = dirs.into_iter().collect();
        order.sort_by_key(|d| std::cmp::Reverse(if d.is_empty() { 0 } else { d.matches('/').count() + 1 }));
        let mut child = self.command();
        child.args(["mktree", "--batch", "-z"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = child.spawn().map_err(|e| Error::GitUnavailable { reason: format!("the `git` program could not be run ({e})") })?;
        let mut stdin = child.stdin.take().expect("piped");
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("piped"));
        let mut write = |entries: &Entries| -> std::io::Result<String> {
            use std::io::BufRead as _;
            let mut record = Vec::new();
            for (name, (mode, id)) in entries {
                let kind = match mode.as_str() {
                    "040000" => "tree",
                    "160000" => "commit",
                    _ => "blob",
                };
                record.extend_from_slice(format!("{mode} {kind} {id}\t").as_bytes());
                record.extend_from_slice(name);
                record.push(0);
            }
            record.push(0);
            stdin.write_all(&record)?;
            stdin.flush()?;
            let mut line = String::new();
            stdout.read_line(&mut line)?;
            Ok(line.trim_end().to_string())
        };
        let mut root_tree = None;
        let mut failure = None;
        for dir in &order {
            let entries = trees.remove(dir).unwrap_or_default();
            if dir.is_empty() {
                match write(&entries) {
                    Ok(id) => root_tree = Some(id),
                    Err(e) => failure = Some(e.to_string()),
                }
                break;
            }
            let (parent, name) = dir.rsplit_once('/').unwrap_or(("", dir));
            let name = name.as_bytes().to_vec();
            let parent_entries = trees.get_mut(parent).expect("a folder's parent is on the chain");
            if entries.is_empty() {
                if parent_entries.get(&name).is_some_and(|(mode, _)| mode == "040000") {
                    parent_entries.remove(&name);
                }
                continue;
            }
            if set_by_change.contains(&(parent.to_string(), name.clone())) {
                failure = Some(format!("{dir} is both a file and a folder among the paths to commit"));
                break;
            }
            match write(&entries) {
                Ok(id) if !id.is_empty() => {
                    parent_entries.insert(name, ("040000".to_string(), id));
                }
                Ok(_) => {
                    failure = Some("git mktree stopped".to_string());
                    break;
                }
                Err(e) => {
                    failure = Some(e.to_string());
                    break;
                }
            }
        }
        drop(stdin);
        let output = child.wait_with_output().map_err(|e| Error::Replication { step: "mktree", reason: e.to_string() })?;
        if !output.status.success() || failure.is_some() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let reason = match failure {
                Some(failure) if stderr.trim().is_empty() => failure,
                _ => first_lines(&stderr),
            };
            return Err(Error::Replication { step: "mktree", reason });
        }
        root_tree.filter(|id| !id.is_empty()).ok_or_else(|| truncated("mktree"))
    }

    /// The empty tree's id in this repository's object format.
    pub fn empty_tree(&self) -> Result<String> {
        Ok(self.run_with("hash-object", ["hash-object", "-w", "-t", "tree", "--stdin"], &[], Some(b""))?.text())
    }

    /// Writes `index` as a tree and returns its id.
    pub fn write_tree(&self, index: Option<&Path>) -> Result<String> {
        let env = index_env(index);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        Ok(self.run_with("write-tree", ["write-tree"], &env, None)?.text())
    }

    /// Makes a commit object (nothing points at it yet).
    pub fn commit_tree(&self, tree: &str, parents: &[&str], message: &str, author: &Person, committer: &Person) -> Result<String> {
        let mut args: Vec<String> = vec!["commit-tree".into(), tree.into()];
        for parent in parents {
            args.push("-p".into());
            args.push((*parent).into());
        }
        let env = [
            ("GIT_AUTHOR_NAME", author.name.as_str()),
            ("GIT_AUTHOR_EMAIL", author.email.as_str()),
            ("GIT_AUTHOR_DATE", author.date.as_str()),
            ("GIT_COMMITTER_NAME", committer.name.as_str()),
            ("GIT_COMMITTER_EMAIL", committer.email.as_str()),
            ("GIT_COMMITTER_DATE", committer.date.as_str()),
        ];
        Ok(self.run_with("commit-tree", &args, &env, Some(message.as_bytes()))?.text())
    }

    /// Moves `refs/heads/<branch>` from `old` (`None`: the branch must not exist) to `new`:
    /// a compare-and-swap, refused when someone else moved it meanwhile.
    pub fn move_branch(&self, branch: &str, new: &str, old: Option<&str>, reason: &str) -> Result<()> {
        let zero = "0000000000000000000000000000000000000000";
        self.run("update-ref", ["update-ref", "-m", reason, &format!("refs/heads/{branch}"), new, old.unwrap_or(zero)])?;
        Ok(())
    }

    /// The paths that differ between two trees (or commits): (status letter, path), no renames.
    pub fn changed_paths(&self, from: &str, to: &str) -> Result<Vec<(char, String)>> {
        let output = self.run("diff-tree", ["diff-tree", "-r", "-z", "--no-renames", "--name-status", from, to])?;
        let mut out = Vec::new();
        let mut fields = output.stdout.split(|&b| b == 0).filter(|f| !f.is_empty());
        while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
            let letter = status.first().map_or('M', |&b| b as char);
            out.push((letter, String::from_utf8_lossy(path).into_owned()));
        }
        Ok(out)
    }

    /// Paths whose work-tree state differs from the index or `HEAD` (modified, added,
    /// deleted, untracked), limited to `pathspec` (git pathspecs: `literal_pathspecs` makes
    /// plain paths into them) when given. Ignored files are left out.
    pub fn dirty_paths(&self, pathspec: &[String]) -> Result<Vec<String>> {
        let mut args: Vec<String> =
            vec!["status".into(), "--porcelain=v1".into(), "-z".into(), "--untracked-files=all".into(), "--no-renames".into()];
        if !pathspec.is_empty() {
            args.push("--".into());
            args.extend(pathspec.iter().cloned());
        }
        let output = self.run("status", &args)?;
        let mut out = Vec::new();
        for record in output.stdout.split(|&b| b == 0).filter(|r| r.len() > 3) {
            out.push(String::from_utf8_lossy(&record[3..]).into_owned());
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

/// A path a tree can hold: relative, `/`-separated, no empty, `.` or `..` part, never `.git`,
/// no newline (`cat-file --batch` reads names a line each).
fn check_tree_path(path: &str) -> Result<()> {
    let bad = path.is_empty()
        || path.contains('\n')
        || path.contains('\0')
        || path.split('/').any(|part| part.is_empty() || part == "." || part == ".." || part.eq_ignore_ascii_case(".git"));
    if bad {
        return Err(Error::Replication { step: "mktree", reason: format!("'{}' is not a path a commit can hold", path.escape_debug()) });
    }
    Ok(())
}

fn truncated(step: &'static str) -> Error {
    Error::Replication { step, reason: "git's answer ended early".into() }
}

/// A raw tree object's entries: name → (mode, with trees as `040000`; hex id).
fn parse_tree(mut body: &[u8], id_len: usize) -> Result<std::collections::BTreeMap<Vec<u8>, (String, String)>> {
    let mut out = std::collections::BTreeMap::new();
    while !body.is_empty() {
        let space = body.iter().position(|&b| b == b' ').ok_or_else(|| truncated("cat-file"))?;
        let nul = body.iter().position(|&b| b == 0).ok_or_else(|| truncated("cat-file"))?;
        if nul < space || body.len() < nul + 1 + id_len {
            return Err(truncated("cat-file"));
        }
        let mode = String::from_utf8_lossy(&body[..space]).into_owned();
        let mode = if mode.len() < 6 { format!("{mode:0>6}") } else { mode };
        let name = body[space + 1..nul].to_vec();
        let id = crate::hex::encode(&body[nul + 1..nul + 1 + id_len]);
        out.insert(name, (mode, id));
        body = &body[nul + 1 + id_len..];
    }
    Ok(out)
}

/// Plain paths as pathspecs that match exactly them (no glob, no magic).
pub fn literal_pathspecs(paths: &[String]) -> Vec<String> {
    paths.iter().map(|p| format!(":(literal){p}")).collect()
}

fn index_env(index: Option<&Path>) -> Vec<(&'static str, String)> {
    index.map(|i| vec![("GIT_INDEX_FILE", i.to_string_lossy().into_owned())]).unwrap_or_default()
}

/// The first lines of git's complaint, enough to say what went wrong.
pub fn first_lines(stderr: &str) -> String {
    let text: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).take(4).collect();
    if text.is_empty() { "git failed without saying why".to_string() } else { text.join(" / ") }
}

/// `git version 2.47.3` → (2, 47, 3).
fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    let word = text.split_whitespace().find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))?;
    let mut parts = word.split('.').map(|p| p.chars().take_while(char::is_ascii_digit).collect::<String>());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let patch = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    Some((major, minor, patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `git` in `dir` for a test's fixture; its stdout.
    fn sh(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
        let mut command = Command::new("git");
        command.current_dir(dir).args(args).env("LC_ALL", "C");
        for name in CLEARED_ENV {
            command.env_remove(name);
        }
        for (k, v) in env {
            command.env(k, v);
        }
        let out = command.output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim_end().to_string()
    }

    fn put(root: &Path, path: &str, text: &str) {
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }

    /// A repository whose branch holds `files`, committed the ordinary way.
    fn repository(files: &[&str]) -> (tempfile::TempDir, Git, String) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        sh(root, &["init", "-q", "-b", "main"], &[]);
        for file in files {
            put(root, file, &format!("{file}\n"));
        }
        sh(root, &["add", "-A"], &[]);
        let who = [
            ("GIT_AUTHOR_NAME", "t"),
            ("GIT_AUTHOR_EMAIL", "t@t.invalid"),
            ("GIT_COMMITTER_NAME", "t"),
            ("GIT_COMMITTER_EMAIL", "t@t.invalid"),
        ];
        sh(root, &["commit", "-q", "--allow-empty", "-m", "base"], &who);
        let head = sh(root, &["rev-parse", "HEAD"], &[]);
        let git = Git::at(root);
        (dir, git, head)
    }

    /// The tree of the whole work tree through a full index (`git add -A` + `write-tree` in a
    /// scratch index): what a commit of the work tree must hold.
    fn full_index_tree(root: &Path) -> String {
        let index = root.join(".git").join("scratch-index");
        let index = index.to_str().unwrap();
        sh(root, &["add", "-A"], &[("GIT_INDEX_FILE", index)]);
        let tree = sh(root, &["write-tree"], &[("GIT_INDEX_FILE", index)]);
        std::fs::remove_file(index).unwrap();
        tree
    }

    fn tree_of_paths(git: &Git, base: Option<&str>, paths: &[&str]) -> String {
        let paths: Vec<String> = paths.iter().map(|p| (*p).to_string()).collect();
        let changes = git.work_tree_entries(git.root(), &paths).unwrap();
        git.tree_with(base, &changes).unwrap()
    }

    #[test]
    fn a_tree_built_by_path_is_the_tree_a_full_index_writes() {
        let (dir, git, head) = repository(&["top.md", "a/e.md", "a/b/c/x.md", "a/b/c/y.md", "a/b/d/z.md", "sib/one.md", "sib/deep/two.md"]);
        let root = dir.path();
        // A change at depth, a new folder, a removal, and a path listed that did not change.
        put(root, "a/b/c/x.md", "x, changed\n");
        put(root, "a/b/new/n.md", "new\n");
        std::fs::remove_file(root.join("a/e.md")).unwrap();
        let tree = tree_of_paths(&git, Some(&head), &["a/b/c/x.md", "a/b/new/n.md", "a/e.md", "top.md"]);
        assert_eq!(tree, full_index_tree(root));
        // Untouched siblings keep their very trees.
        for folder in ["sib", "a/b/d"] {
            assert_eq!(
                sh(root, &["rev-parse", &format!("{tree}:{folder}")], &[]),
                sh(root, &["rev-parse", &format!("{head}:{folder}")], &[])
            );
        }
        // Nothing to change: the head's own tree.
        assert_eq!(tree_of_paths(&git, Some(&head), &[]), sh(root, &["rev-parse", &format!("{head}^{{tree}}")], &[]));
    }

    #[test]
    fn removals_that_empty_a_folder_remove_it_up_the_chain() {
        let (dir, git, head) = repository(&["keep.md", "a/b/c/only.md", "a/other.md"]);
        let root = dir.path();
        std::fs::remove_dir_all(root.join("a/b")).unwrap();
        let tree = tree_of_paths(&git, Some(&head), &["a/b/c/only.md"]);
        assert_eq!(tree, full_index_tree(root));
        assert_eq!(sh(root, &["ls-tree", "--name-only", &tree, "a/"], &[]), "a/other.md");
        // Every file gone: the empty tree.
        std::fs::remove_dir_all(root.join("a")).unwrap();
        std::fs::remove_file(root.join("keep.md")).unwrap();
        let tree = tree_of_paths(&git, Some(&head), &["keep.md", "a/other.md", "a/b/c/only.md"]);
        assert_eq!(tree, git.empty_tree().unwrap());
    }

    #[test]
    fn a_file_may_become_a_folder_and_a_folder_a_file() {
        let (dir, git, head) = repository(&["p.md", "q/inner.md", "r.md"]);
        let root = dir.path();
        std::fs::remove_file(root.join("p.md")).unwrap();
        put(root, "p.md/child.md", "child\n");
        std::fs::remove_dir_all(root.join("q")).unwrap();
        put(root, "q", "q is a file now\n");
        let tree = tree_of_paths(&git, Some(&head), &["p.md", "p.md/child.md", "q", "q/inner.md"]);
        assert_eq!(tree, full_index_tree(root));
        // Both a file and a folder of one name among the changes is refused, never guessed.
        let both = std::collections::BTreeMap::from([
            ("s".to_string(), Some(("100644".to_string(), sh(root, &["rev-parse", &format!("{head}:r.md")], &[])))),
            ("s/t.md".to_string(), Some(("100644".to_string(), sh(root, &["rev-parse", &format!("{head}:r.md")], &[])))),
        ]);
        assert!(git.tree_with(Some(&head), &both).is_err());
    }

    #[test]
    fn modes_links_and_an_unborn_branch_are_as_git_add_makes_them() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        sh(root, &["init", "-q", "-b", "main"], &[]);
        let git = Git::at(root);
        put(root, "n/plain.md", "plain\n");
        put(root, "n/tool.sh", "#!/bin/sh\n");
        std::fs::set_permissions(root.join("n/tool.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("plain.md", root.join("n/link.md")).unwrap();
        let tree = tree_of_paths(&git, None, &["n/plain.md", "n/tool.sh", "n/link.md", "n/absent.md"]);
        assert_eq!(tree, full_index_tree(root));
        let listed = sh(root, &["ls-tree", "-r", &tree], &[]);
        assert!(listed.contains("100755 blob") && listed.contains("120000 blob"), "{listed}");
        // A path beyond a symbolic link is not in the work tree.
        std::os::unix::fs::symlink("n", root.join("via")).unwrap();
        let changes = git.work_tree_entries(root, &["via/plain.md".to_string()]).unwrap();
        assert_eq!(changes.get("via/plain.md"), Some(&None));
        // Paths a tree cannot hold are refused.
        for bad in ["", "/abs", "a//b", "a/../b", ".git/config", "a\nb"] {
            assert!(git.work_tree_entries(root, &[bad.to_string()]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_whole_vault_is_hashed_in_one_call_whose_answer_outgrows_a_pipe() {
        // 4,000 ids (164 KB) answered while the paths are still being read: written and read
        // at once, never each waiting on the other.
        let (dir, git, _) = repository(&[]);
        let paths: Vec<String> = (0..4000).map(|i| format!("f/{:02}/note-{i:05}.md", i % 40)).collect();
        for path in &paths {
            put(dir.path(), path, path);
        }
        let entries = git.work_tree_entries(dir.path(), &paths).unwrap();
        assert_eq!(entries.values().filter(|e| e.is_some()).count(), 4000);
        assert_eq!(git.tree_with(None, &entries).unwrap(), full_index_tree(dir.path()));
    }

    #[test]
    fn versions_are_read_from_what_git_prints() {
        assert_eq!(parse_version("git version 2.47.3"), Some((2, 47, 3)));
        assert_eq!(parse_version("git version 2.39.2.windows.1"), Some((2, 39, 2)));
        assert_eq!(parse_version("git version 2.38"), Some((2, 38, 0)));
        assert_eq!(parse_version("nothing here"), None);
    }
}
