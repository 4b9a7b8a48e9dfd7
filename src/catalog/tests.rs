//! Unit tests for catalog planning and paging.
