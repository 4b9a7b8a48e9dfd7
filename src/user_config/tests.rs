//! Unit tests of the per-user configuration folder resolution.

use std::path::PathBuf;

use super::*;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<PathBuf> {
    let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    move |name| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| PathBuf::from(v))
}

#[test]
fn the_override_wins_over_xdg_and_home() {
    let dir = config_dir_from(env(&[(CONFIG_DIR_ENV, "/srv/pv"), ("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")])).unwrap();
    assert_eq!(dir, PathBuf::from("/srv/pv"));
}

#[test]
fn xdg_then_home_are_used_with_a_paravault_folder() {
    assert_eq!(config_dir_from(env(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")])).unwrap(), PathBuf::from("/x/paravault"));
    assert_eq!(config_dir_from(env(&[("HOME", "/h")])).unwrap(), PathBuf::from("/h/.config/paravault"));
}

#[test]
fn relative_or_missing_locations_are_typed_errors() {
    let relative = config_dir_from(env(&[(CONFIG_DIR_ENV, "conf")])).unwrap_err();
    assert_eq!(relative.code(), "invalid_argument");
    let relative_xdg = config_dir_from(env(&[("XDG_CONFIG_HOME", "x")])).unwrap_err();
    assert_eq!(relative_xdg.code(), "invalid_argument");
    let none = config_dir_from(env(&[])).unwrap_err();
    assert_eq!(none.code(), "invalid_argument");
}
