//! Read-only views of the model for the people's surface (`paravault web`): how a note's
//! wikilinks resolve (the engine's own resolution, the one lint and link rot use), the notes
//! that really link to a note (catalog pages left out), the frontmatter tags, a bounded link
//! graph, and an attachment's bytes for an embedded image. *Invariant: read-only; files are
//! read through folder handles within the policy's limits, never through a link.*

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::VaultState;
use crate::error::{Error, Result};
use crate::inventory::{Inventory, Resolution};
use crate::note::body::{Link, LinkKind};
use crate::note::path::VaultPath;

/// Where a wikilink or an embed of a note leads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum LinkTarget {
    /// A Markdown page of the vault (a note or a catalog page).
    Note(String),
    /// Another file of the vault (an attachment: an image, a PDF).
    File(String),
    /// No file matches.
    Broken,
    /// Several files match the name; the link names none of them.
    Ambiguous(Vec<String>),
}

/// One node of a link graph: a note, its title, its links in and out within the graph.
#[derive(Debug, Clone, Serialize)]
pub struct GraphNode {
    pub path: String,
    pub title: String,
    /// Resolved links to and from this note across the whole vault.
    pub degree: usize,
}

/// A link graph bounded in nodes: `edges` are indexes into `nodes` (source → target).
#[derive(Debug, Clone, Serialize)]
pub struct LinkGraph {
    pub nodes: Vec<GraphNode>,
    pub edges: Vec<(usize, usize)>,
    /// Notes the graph could have held past the bound (left out).
    pub left_out: usize,
}

/// A frontmatter tag and the notes carrying it.
#[derive(Debug, Clone, Serialize)]
pub struct TagCount {
    pub tag: String,
    pub notes: usize,
}

/// Largest attachment `read_attachment` returns (an embedded image).
pub const ATTACHMENT_BYTES_MAX: usize = 16 * 1024 * 1024;

/// The resolved outgoing wikilinks and embeds of a record, each once, catalog pages excluded.
fn resolved_targets(inv: &Inventory, vault: &VaultState, path: &VaultPath, links: &[Link]) -> BTreeSet<VaultPath> {
    links
        .iter()
        .filter_map(|link| match inv.resolve(path, link, &vault.policy) {
            Resolution::Resolved(target) if target != *path && inv.records.get(&target).is_some_and(|r| r.is_note()) => Some(target),
            _ => None,
        })
        .collect()
}

/// The graph of notes `chosen` (in order) and the links among them.
fn bounded_graph<'a>(
    inv: &Inventory,
    chosen: &[VaultPath],
    left_out: usize,
    links_out: impl Fn(&VaultPath) -> Option<&'a BTreeSet<VaultPath>>,
    degree: impl Fn(&VaultPath) -> usize,
) -> LinkGraph {
    let index: BTreeMap<&VaultPath, usize> = chosen.iter().enumerate().map(|(i, p)| (p, i)).collect();
    let mut edges = Vec::new();
    for (i, path) in chosen.iter().enumerate() {
        for target in links_out(path).into_iter().flatten() {
            if let Some(&j) = index.get(target) {
                edges.push((i, j));
            }
        }
    }
    let nodes = chosen
        .iter()
        .map(|p| GraphNode {
            path: p.to_string(),
            title: inv.records.get(p).and_then(|r| r.meta.title.clone()).unwrap_or_default(),
            degree: degree(p),
        })
        .collect();
    LinkGraph { nodes, edges, left_out }
}

/// A tag as the vault compares it: without a leading `#`, lower-cased.
pub fn tag_key(tag: &str) -> String {
    tag.trim().trim_start_matches('#').to_lowercase()
}

impl VaultState {
    /// How each of `targets` (a wikilink's or an embed's target, alias and heading stripped;
    /// `true` for an embed) resolves from note `source`, in order.
    pub fn resolve_wikilinks(&self, source: &str, targets: &[(String, bool)]) -> Result<Vec<LinkTarget>> {
        let source = VaultPath::parse(source)?;
        self.with_inventory(|inv| {
            targets
                .iter()
                .map(|(target, embed)| {
                    let link = Link { kind: if *embed { LinkKind::Embed } else { LinkKind::Wiki }, target: target.clone(), line: 0 };
                    match inv.resolve(&source, &link, &self.policy) {
                        Resolution::Resolved(path) if inv.records.contains_key(&path) => LinkTarget::Note(path.to_string()),
                        Resolution::Resolved(path) => LinkTarget::File(path.to_string()),
                        Resolution::Broken => LinkTarget::Broken,
                        Resolution::Ambiguous(paths) => LinkTarget::Ambiguous(paths.iter().map(ToString::to_string).collect()),
                    }
                })
                .collect()
        })
    }

    /// The notes whose links resolve to `path`, in path order; catalog pages (`_index.md`,
    /// `_index-N.md`) and the note itself are left out.
    pub fn backlinks(&self, path: &str) -> Result<Vec<String>> {
        let path = VaultPath::parse(path)?;
        self.with_inventory(|inv| {
            inv.linkers_of(&path)
                .into_iter()
                .filter(|source| *source != path)
                .filter_map(|source| inv.records.get(&source))
                .filter(|record| record.is_note())
                .filter(|record| {
                    record
                        .links
                        .iter()
                        .any(|link| matches!(inv.resolve(&record.path, link, &self.policy), Resolution::Resolved(t) if t == path))
                })
                .map(|record| record.path.to_string())
                .collect()
        })
    }

    /// Every frontmatter tag (compared without `#` and case) with the number of notes carrying
    /// it, by name.
    pub fn tag_index(&self) -> Result<Vec<TagCount>> {
        self.with_inventory(|inv| {
            let mut counts: BTreeMap<String, usize> = BTreeMap::new();
            for record in inv.notes() {
                let tags: BTreeSet<String> = record.meta.tags.iter().map(|t| tag_key(t)).filter(|t| !t.is_empty()).collect();
                for tag in tags {
                    *counts.entry(tag).or_default() += 1;
                }
            }
            counts.into_iter().map(|(tag, notes)| TagCount { tag, notes }).collect()
        })
    }

    /// The notes carrying frontmatter tag `tag` (path, title), in path order.
    pub fn tagged_notes(&self, tag: &str) -> Result<Vec<(String, String)>> {
        let key = tag_key(tag);
        self.with_inventory(|inv| {
            inv.notes()
                .filter(|r| r.meta.tags.iter().any(|t| tag_key(t) == key))
                .map(|r| (r.path.to_string(), r.meta.title.clone().unwrap_or_default()))
                .collect()
        })
    }

    /// The link graph around note `center` (its resolved links out and the notes linking to it,
    /// then their links among each other), or, without a centre, the `max_nodes` most linked
    /// notes of the vault and the links among them (from the kept link index, `summaries`:
    /// O(change) since the last ask, never every note per request). At most `max_nodes` nodes.
    pub fn link_graph(&self, center: Option<&str>, max_nodes: usize) -> Result<LinkGraph> {
        let Some(center) = center.map(VaultPath::parse).transpose()? else {
            return self.with_link_index(|inv, index| {
                let (chosen, left_out) = index.most_linked(max_nodes);
                bounded_graph(inv, &chosen, left_out, |p| index.links_out(p), |p| index.degree(p))
            });
        };
        self.with_inventory(|inv| {
            if !inv.records.get(&center).is_some_and(|r| r.is_note()) {
                return Err(Error::NoteUnreadable { path: center.to_string(), reason: "no such note".into() });
            }
            let mut out_links: BTreeMap<VaultPath, BTreeSet<VaultPath>> = BTreeMap::new();
            let add_record = |path: &VaultPath, out_links: &mut BTreeMap<VaultPath, BTreeSet<VaultPath>>| {
                if out_links.contains_key(path) {
                    return;
                }
                let targets = inv.records.get(path).map(|r| resolved_targets(inv, self, path, &r.links)).unwrap_or_default();
                out_links.insert(path.clone(), targets);
            };
            add_record(&center, &mut out_links);
            let mut around: BTreeSet<VaultPath> = out_links[&center].clone();
            for source in inv.linkers_of(&center) {
                if source == center || !inv.records.get(&source).is_some_and(|r| r.is_note()) {
                    continue;
                }
                add_record(&source, &mut out_links);
                if out_links[&source].contains(&center) {
                    around.insert(source);
                }
            }
            for path in &around {
                add_record(path, &mut out_links);
            }
            let mut degree: BTreeMap<VaultPath, usize> = BTreeMap::new();
            for (source, targets) in &out_links {
                for target in targets {
                    *degree.entry(source.clone()).or_default() += 1;
                    *degree.entry(target.clone()).or_default() += 1;
                }
            }
            let mut ranked: Vec<VaultPath> = around.into_iter().collect();
            ranked.sort_by(|a, b| degree.get(b).cmp(&degree.get(a)).then_with(|| a.cmp(b)));
            let chosen: Vec<VaultPath> = std::iter::once(center.clone()).chain(ranked).collect();
            let left_out = chosen.len().saturating_sub(max_nodes);
            let chosen: Vec<VaultPath> = chosen.into_iter().take(max_nodes).collect();
            Ok(bounded_graph(inv, &chosen, left_out, |p| out_links.get(p), |p| degree.get(p).copied().unwrap_or(0)))
        })?
    }

    /// The bytes of attachment `raw` (a file of the vault that is no Markdown page and whose
    /// extension the policy lists in `lint.attachment_extensions`), read through folder handles,
    /// at most `ATTACHMENT_BYTES_MAX`.
    pub fn read_attachment(&self, raw: &str) -> Result<Vec<u8>> {
        let path = VaultPath::parse(raw)?;
        let unreadable = |reason: &str| Error::NoteUnreadable { path: path.to_string(), reason: reason.into() };
        let extension = path.file_name().rsplit_once('.').map(|(_, e)| e.to_lowercase()).unwrap_or_default();
        if !self.policy.policy.lint.attachment_extensions.contains(&extension) || crate::scan::classify(&self.policy, &path).is_some() {
            return Err(unreadable("not an attachment of the vault"));
        }
        if !self.with_inventory(|inv| inv.files.contains(&path))? {
            return Err(unreadable("no such file"));
        }
        crate::store::nofollow::resolve_safe(&self.root, path.as_str())?;
        let bytes = crate::store::beneath::read(&self.root, path.as_str())?.ok_or_else(|| unreadable("no such file"))?;
        if bytes.len() > ATTACHMENT_BYTES_MAX {
            return Err(unreadable("larger than an embedded attachment may be"));
        }
        Ok(bytes)
    }
}
