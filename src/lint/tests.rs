//! Unit tests for lint rules.
