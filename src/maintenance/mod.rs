//! Maintenance operations: rot audit (read-only), archiving, frontmatter healing and Markdown
//! fixes. Every change they make goes through the one write transaction (`write::execute`), so
//! catalogs, the search generation and receipts are current afterwards.

pub mod archive;
pub mod heal;
pub mod link_rot;
pub mod markdown_fix;
pub mod rot;
