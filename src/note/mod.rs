//! The pure domain model of a note: paths, frontmatter, OKF metadata, Markdown body facts.
//! Nothing in `note/` performs I/O except `path::resolve_safe`, which inspects (never writes)
//! the filesystem to refuse symbolic links.

pub mod body;
pub mod frontmatter;
pub mod metadata;
pub mod path;
pub mod visible;
pub mod worklist;
pub mod yaml_edit;
