//! Unit tests of surface selection: parsing `--surface` and refusing colliding catalogs.

use super::*;

#[test]
fn lists_parse_case_insensitively_without_repeats() {
    assert_eq!(Surface::parse_list("power").unwrap(), vec![Surface::Power]);
    assert_eq!(Surface::parse_list(" Power , STEPSTONE,power").unwrap(), vec![Surface::Power, Surface::Stepstone]);
}

#[test]
fn unknown_or_empty_lists_name_the_valid_surfaces() {
    let unknown = Surface::parse_list("power,notion").unwrap_err();
    assert!(unknown.contains("\"notion\"") && unknown.contains("ctxvault"), "{unknown}");
    assert!(Surface::parse_list(" , ").unwrap_err().contains("no surface"));
}

#[test]
fn every_surface_name_round_trips() {
    for surface in Surface::ALL {
        assert_eq!(Surface::parse_list(surface.name()).unwrap(), vec![surface]);
    }
}

#[test]
fn the_power_catalog_is_the_default_tool_list() {
    let specs = catalogs(&[Surface::Power]).unwrap();
    assert_eq!(specs.len(), super::super::tools::catalog().len());
    assert!(specs.iter().all(|s| s.surface == Surface::Power));
}

#[test]
fn a_surface_listed_twice_is_served_once() {
    let surfaces = Surface::parse_list("power,power").unwrap();
    assert!(catalogs(&surfaces).is_ok());
}

#[test]
fn failures_keep_the_power_shape_and_add_details_only_when_given() {
    let mut error = ToolError::new("task_not_found", "no such task", false);
    let plain = Surface::Power.failure_json(&error);
    assert_eq!(plain["error"]["code"], "task_not_found");
    assert!(plain["error"].get("details").is_none());
    error.details = Some(serde_json::json!({"candidates": ["a1", "a2"]}));
    assert_eq!(Surface::Power.failure_json(&error)["error"]["details"]["candidates"][1], "a2");
}
