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

#[test]
fn all_four_surfaces_serve_together_without_a_name_collision() {
    let specs = catalogs(&Surface::ALL).unwrap();
    let mut names: Vec<&str> = specs.iter().map(|s| s.name).collect();
    let count = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), count);
    for surface in Surface::ALL {
        assert!(specs.iter().any(|s| s.surface == surface), "{} has tools", surface.name());
    }
}

#[test]
fn every_power_tool_takes_vault_path_through_the_surface_and_no_other_surface_does() {
    let policy = crate::policy::LoadedPolicy::from_texts(None).expect("the default policy").policy;
    let arguments = |value: serde_json::Value| serde_json::Map::from_iter([("vault_path".to_string(), value)]);
    for spec in catalogs(&Surface::ALL).unwrap() {
        let declared = (spec.input_schema)(&policy).get("properties").and_then(|p| p.get("vault_path")).is_some();
        if spec.surface != Surface::Power {
            assert!(!declared, "{} ({}) declares vault_path", spec.name, spec.surface.name());
            continue;
        }
        assert!(declared, "{} does not declare vault_path", spec.name);
        // The surface reads the argument before the tool's own arguments: a wrong type is
        // refused by that check, whatever else the tool requires.
        let refused = match (spec.prepare)(arguments(serde_json::json!(5))) {
            Err(message) => message,
            Ok(_) => panic!("{}: a numeric vault_path was accepted", spec.name),
        };
        assert!(refused.starts_with("argument `vault_path`: expected a string"), "{}: {refused}", spec.name);
    }
    let lint = catalogs(&[Surface::Power]).unwrap().into_iter().find(|s| s.name == "lint_vault").unwrap();
    let Ok((vault_path, _)) = (lint.prepare)(arguments(serde_json::json!("/elsewhere"))) else {
        panic!("lint_vault refused its arguments")
    };
    assert_eq!(vault_path, "/elsewhere", "the argument reaches the server's boundary check");
}
