//! The pure domain model of a note: paths, frontmatter, OKF metadata, Markdown body facts.
//! Nothing in `note/` performs I/O (`tests/it/tidy.rs`): the disk's check of a path is
//! `store::nofollow::resolve_safe`.

pub mod body;
pub mod frontmatter;
pub mod metadata;
pub mod path;
pub mod visible;
pub mod worklist;
pub mod yaml_edit;
