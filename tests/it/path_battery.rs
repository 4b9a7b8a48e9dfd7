//! Path-escape battery: hostile caller paths, each refused for its specific `PathRefusal`,
//! against real temporary vaults (symbolic links included), plus accepted controls and a
//! property test that an accepted `VaultPath` never leaves the root lexically.

use std::path::{Component, Path};

use paravault::Error;
use paravault::error::PathRefusal::{self, *};
use paravault::note::path::VaultPath;
use paravault::policy::LoadedPolicy;
use paravault::vault::resolve_note_path;
use proptest::prelude::*;
use tempfile::TempDir;

fn para_folders() -> Vec<String> {
    layout().para_folders
}

fn layout() -> paravault::policy::Layout {
    LoadedPolicy::from_texts(None).unwrap().policy.layout
}

/// A vault with every P.A.R.A. folder and one existing note.
fn vault() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    for folder in para_folders() {
        std::fs::create_dir(dir.path().join(folder)).unwrap();
    }
    std::fs::create_dir(dir.path().join("01_Projects/alpha")).unwrap();
    std::fs::write(dir.path().join("01_Projects/alpha/plan.md"), "---\ntitle: Plan\n---\n").unwrap();
    dir
}

fn refusal(root: &Path, raw: &str) -> Option<PathRefusal> {
    match resolve_note_path(root, raw, &layout()) {
        Ok(_) => None,
        Err(Error::PathRefused { reason, .. }) => Some(reason),
        Err(other) => panic!("{raw:?}: unexpected error {other}"),
    }
}

/// (input, expected refusal). The order of checks decides which reason wins when an input
/// breaks several rules: length, control characters, backslash, absolute, drive letter,
/// components; then the same on the percent-decoded text; then `.md`, P.A.R.A. folder, disk.
const HOSTILE: &[(&str, PathRefusal)] = &[
    ("", Empty),
    // Absolute and drive-letter forms.
    ("/etc/passwd", Absolute),
    ("/01_Projects/x.md", Absolute),
    ("//server/share/x.md", Absolute),
    ("C:/x.md", DriveLetter),
    ("C:x.md", DriveLetter),
    ("z:", DriveLetter),
    ("c:\\x.md", Backslash),
    ("\\\\server\\share\\x.md", Backslash),
    ("\\\\?\\C:\\x.md", Backslash),
    ("01_Projects\\x.md", Backslash),
    ("01_Projects\\..\\..\\x.md", Backslash),
    // Dot and empty components.
    ("..", ParentComponent),
    ("../x.md", ParentComponent),
    ("01_Projects/../../x.md", ParentComponent),
    ("01_Projects/alpha/../../../etc/passwd.md", ParentComponent),
    (".", CurrentComponent),
    ("01_Projects/./x.md", CurrentComponent),
    ("./01_Projects/x.md", CurrentComponent),
    ("01_Projects//x.md", EmptyComponent),
    ("01_Projects/x.md/", EmptyComponent),
    // Control characters, raw.
    ("01_Projects/x\u{0}.md", ControlCharacter),
    ("01_Projects/x\n.md", ControlCharacter),
    ("01_Projects/x\r.md", ControlCharacter),
    ("01_Projects/x\t.md", ControlCharacter),
    ("01_Projects/x\u{7f}.md", ControlCharacter),
    ("01_Projects/x\u{85}.md", ControlCharacter),
    ("01_Projects/\u{1b}[31mx.md", ControlCharacter),
    // Percent-encoded escapes: refused for what they decode to.
    ("%2e%2e/x.md", ParentComponent),
    ("%2E%2E/x.md", ParentComponent),
    ("..%2fx.md", ParentComponent),
    ("01_Projects/%2e%2e/%2e%2e/etc.md", ParentComponent),
    ("01_Projects%2f..%2f..%2fx.md", ParentComponent),
    ("01_Projects/%2e/x.md", CurrentComponent),
    ("01_Projects%2f%2fx.md", EmptyComponent),
    ("%2fetc%2fpasswd", Absolute),
    ("%2F01_Projects%2Fx.md", Absolute),
    ("C%3a/x.md", DriveLetter),
    ("01_Projects%5cx.md", Backslash),
    ("%5c%5cserver%5cshare%5cx.md", Backslash),
    ("01_Projects/%00.md", ControlCharacter),
    ("01_Projects/x%0a.md", ControlCharacter),
    ("01_Projects/x%7f.md", ControlCharacter),
    ("01_Projects/x%c2%85.md", ControlCharacter),
    // Double encoding and bad UTF-8.
    ("%252e%252e/x.md", BadPercentEncoding),
    ("01_Projects/%252fetc.md", BadPercentEncoding),
    ("%ff.md", BadPercentEncoding),
    ("01_Projects/%c3%28.md", BadPercentEncoding),
    ("01_Projects/%ed%a0%80.md", BadPercentEncoding),
    // Not a note, or not in a P.A.R.A. folder.
    ("01_Projects/x.txt", NotMarkdown),
    ("01_Projects/x.MD", NotMarkdown),
    ("01_Projects/x", NotMarkdown),
    ("01_Projects/x.md.txt", NotMarkdown),
    ("01_Projects/.md", NotMarkdown),
    ("01_Projects/alpha/.md", NotMarkdown),
    ("x.md", NotInParaFolder),
    ("Random/x.md", NotInParaFolder),
    ("01_projects/x.md", NotInParaFolder),
    ("05_Templates/x.md", NotInParaFolder),
    ("PROTOCOLS/x.md", NotInParaFolder),
    (".git/x.md", NotInParaFolder),
    ("01_Projects.md", NotInParaFolder),
    // Bidirectional text controls (a name that displays as another), raw and encoded.
    ("01_Projects/evil\u{202E}dm.txt.md", BidiControl),
    ("01_Projects/a\u{2067}b.md", BidiControl),
    ("01_Projects/a%E2%80%AEb.md", BidiControl),
    // Names the engine owns, and folders it never reads notes from.
    ("02_Areas/_index.md", EngineOwned),
    ("02_Areas/sub/_index-2.md", EngineOwned),
    ("02_Areas/_Index.md", EngineOwned),
    ("01_Projects/.paravault/x.md", EngineOwned),
    ("01_Projects/.pv-tmp-abc.md", EngineOwned),
    ("03_Resources/.git/config.md", ExcludedFolder),
    ("03_Resources/.obsidian/x.md", ExcludedFolder),
    ("03_Resources/.anything/x.md", ExcludedFolder),
    ("01_Projects/node_modules/pkg.md", ExcludedFolder),
    ("01_Projects/a/Node_Modules/pkg.md", ExcludedFolder),
];

#[test]
fn hostile_inputs_are_refused_for_their_reason() {
    let vault = vault();
    let mut wrong = Vec::new();
    for &(raw, expected) in HOSTILE {
        let got = refusal(vault.path(), raw);
        if got != Some(expected) {
            wrong.push(format!("{raw:?}: expected {expected:?}, got {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "{} of {} inputs misjudged:\n{}", wrong.len(), HOSTILE.len(), wrong.join("\n"));
    assert!(HOSTILE.len() >= 40);
}

#[test]
fn overlong_paths_are_refused() {
    let vault = vault();
    let long = format!("01_Projects/{}.md", "a".repeat(2000));
    assert_eq!(refusal(vault.path(), &long), Some(TooLong));
    // Checked on the raw text: encoding cannot smuggle a long path under the limit's radar,
    // and a short decoded path spelled long is refused too.
    let spelled_long = format!("01_Projects/{}.md", "%61".repeat(400));
    assert_eq!(refusal(vault.path(), &spelled_long), Some(TooLong));
    // At the limit: 1024 bytes in components of at most 255 bytes (the file-system limit).
    let folder = "a".repeat(200);
    let at_limit = format!("01_Projects/{folder}/{folder}/{folder}/{folder}/{}.md", "b".repeat(205));
    assert_eq!(at_limit.len(), 1024);
    assert_eq!(refusal(vault.path(), &at_limit), None);
    // One component over 255 bytes is refused (not left to the file system's retryable ENAMETOOLONG).
    assert_eq!(refusal(vault.path(), &format!("01_Projects/{}.md", "a".repeat(253))), Some(ComponentTooLong));
    assert_eq!(refusal(vault.path(), &format!("01_Projects/{}.md", "a".repeat(252))), None);
}

#[test]
fn refusal_messages_escape_control_characters() {
    let err = VaultPath::parse("01_Projects/x\u{1b}[2J\n.md").unwrap_err();
    let message = err.to_string();
    assert!(!message.chars().any(char::is_control), "{message:?}");
}

#[cfg(unix)]
mod symlinks {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn symlinked_directory_pointing_outside_is_refused() {
        let vault = vault();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.md"), "secret").unwrap();
        symlink(outside.path(), vault.path().join("01_Projects/escape")).unwrap();
        assert_eq!(refusal(vault.path(), "01_Projects/escape/secret.md"), Some(Symlink));
        // A note that does not exist yet behind the link is refused as well (a write target).
        assert_eq!(refusal(vault.path(), "01_Projects/escape/new.md"), Some(Symlink));
        assert_eq!(refusal(vault.path(), "01_Projects/escape%2fsecret.md"), Some(Symlink));
    }

    #[test]
    fn symlinked_para_folder_is_refused() {
        let vault = vault();
        let outside = tempfile::tempdir().unwrap();
        std::fs::remove_dir(vault.path().join("03_Resources")).unwrap();
        symlink(outside.path(), vault.path().join("03_Resources")).unwrap();
        assert_eq!(refusal(vault.path(), "03_Resources/x.md"), Some(Symlink));
    }

    #[test]
    fn symlinked_note_file_pointing_outside_is_refused() {
        let vault = vault();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("passwd"), "root:x:0:0").unwrap();
        symlink(outside.path().join("passwd"), vault.path().join("02_Areas/passwd.md")).unwrap();
        assert_eq!(refusal(vault.path(), "02_Areas/passwd.md"), Some(Symlink));
    }

    #[test]
    fn symlink_to_a_file_inside_the_vault_is_refused_too() {
        let vault = vault();
        symlink(vault.path().join("01_Projects/alpha/plan.md"), vault.path().join("02_Areas/alias.md")).unwrap();
        assert_eq!(refusal(vault.path(), "02_Areas/alias.md"), Some(Symlink));
        // Relative link target, dangling link: still a link.
        symlink("../01_Projects/alpha/plan.md", vault.path().join("02_Areas/relative.md")).unwrap();
        assert_eq!(refusal(vault.path(), "02_Areas/relative.md"), Some(Symlink));
        symlink("/nonexistent/target.md", vault.path().join("02_Areas/dangling.md")).unwrap();
        assert_eq!(refusal(vault.path(), "02_Areas/dangling.md"), Some(Symlink));
    }

    #[test]
    fn a_symlinked_vault_root_itself_is_followed() {
        // The root is the caller's choice; only components below it are checked.
        let vault = vault();
        let holder = tempfile::tempdir().unwrap();
        let link = holder.path().join("vault-link");
        symlink(vault.path(), &link).unwrap();
        let (path, absolute) = resolve_note_path(&link, "01_Projects/alpha/plan.md", &layout()).unwrap();
        assert_eq!(path.as_str(), "01_Projects/alpha/plan.md");
        assert!(absolute.starts_with(&link));
    }
}

#[test]
fn ordinary_paths_are_accepted() {
    let vault = vault();
    for (raw, expected) in [
        ("01_Projects/alpha/plan.md", "01_Projects/alpha/plan.md"),
        ("01_Projects/alpha/new-note.md", "01_Projects/alpha/new-note.md"),
        ("01_Projects/not/yet/created.md", "01_Projects/not/yet/created.md"),
        ("00_Inbox/my%20note.md", "00_Inbox/my note.md"),
        ("00_Inbox/a%2Fb.md", "00_Inbox/a/b.md"),
        ("03_Resources/日本語/café.md", "03_Resources/日本語/café.md"),
        ("03_Resources/%E6%97%A5%E6%9C%AC.md", "03_Resources/日本.md"),
        ("04_Archive/...md", "04_Archive/...md"),
        ("06_Daily_Logs/2024-01-01_log.md", "06_Daily_Logs/2024-01-01_log.md"),
        ("02_Areas/..hidden.md", "02_Areas/..hidden.md"),
        ("02_Areas/C:/x.md", "02_Areas/C:/x.md"),
        ("02_Areas/100%25.md", "02_Areas/100%.md"),
    ] {
        let (path, absolute) = resolve_note_path(vault.path(), raw, &layout()).unwrap_or_else(|e| panic!("{raw:?}: {e}"));
        assert_eq!(path.as_str(), expected, "{raw:?}");
        assert_eq!(absolute, vault.path().join(expected), "{raw:?}");
    }
}

/// Every component after `root` is a normal name, so the join cannot climb out of it.
fn stays_under(root: &Path, path: &VaultPath) -> bool {
    let joined = path.under(root);
    joined.starts_with(root)
        && joined != root
        && joined.components().count() > root.components().count()
        && joined.components().skip(root.components().count()).all(|c| matches!(c, Component::Normal(_)))
}

fn token() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "/",
        ".",
        "..",
        "%",
        "%2e",
        "%2E",
        "%2f",
        "%2F",
        "%5c",
        "%25",
        "%00",
        "%0a",
        "%ff",
        "%c3",
        "\\",
        ":",
        "C:",
        "a",
        "b",
        "e",
        "f",
        "2",
        ".md",
        "\u{0}",
        "\n",
        "\u{7f}",
        "01_Projects",
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn accepted_paths_stay_under_the_root_chars(raw in "[/.%2ef\\\\:ab5c0\\x00\\n\\r\\x7f\\x1b]{0,32}") {
        if let Ok(path) = VaultPath::parse(&raw) {
            prop_assert!(stays_under(Path::new("/vault/root"), &path), "{:?} -> {:?}", raw, path);
            prop_assert!(!path.as_str().chars().any(|c| c.is_control() || c == '\\'));
        }
    }

    #[test]
    fn accepted_paths_stay_under_the_root_tokens(tokens in prop::collection::vec(token(), 0..12)) {
        let raw: String = tokens.concat();
        if let Ok(path) = VaultPath::parse(&raw) {
            prop_assert!(stays_under(Path::new("/vault/root"), &path), "{:?} -> {:?}", raw, path);
            prop_assert!(!path.as_str().chars().any(|c| c.is_control() || c == '\\'));
            if !path.as_str().contains('%') {
                prop_assert_eq!(VaultPath::parse(path.as_str()).unwrap(), path);
            }
        }
    }
}
