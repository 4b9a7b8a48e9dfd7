//! The vault's catalogs: the remembered renderer state (a cache of what the last render saw,
//! kept by a long-lived process and merged after each of its writes, forgotten when a page
//! changed outside; a one-shot write plans without it, as it lags their folders), planning a
//! write's pages, and regenerating `index.md` and the folder catalogs under the writer lock.
//! *Invariant: a catalog page is rewritten only under the writer lock, and only from the
//! model; a page someone else changed makes the remembered state suspect (reloaded, pages
//! re-verified), never trusted.*

use std::collections::BTreeSet;

use super::{IndexReport, VaultState};
use crate::catalog::{self, CatalogState};
use crate::error::{Error, Result};
use crate::inventory::{self, ModelView};
use crate::note::path::VaultPath;
use crate::scan::PageKind;
use crate::store::{durable, layout};

impl VaultState {
    /// The catalog pages of `path`'s folders (each folder's pages up to the first missing one)
    /// and the root index: what a change of `path` by another process may have rewritten.
    pub(crate) fn catalog_pages_of(&self, path: &VaultPath) -> Vec<String> {
        let mut pages = Vec::new();
        for dir in catalog::affected_dirs(path) {
            for n in 1.. {
                let Ok(page) = VaultPath::parse_walked(&format!("{dir}/{}", layout::sub_index_page_name(n))) else { break };
                let exists = page.under(&self.root).is_file();
                pages.push(page.to_string());
                if !exists {
                    break;
                }
            }
        }
        pages.push(layout::ROOT_INDEX.to_string());
        pages
    }

    /// Plans catalog updates for `dirs` against the remembered renderer state.
    pub(crate) fn plan_catalogs(&self, inventory: &dyn ModelView, dirs: &BTreeSet<String>) -> Result<catalog::CatalogPlan> {
        let mut state = self.catalog_state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if state.is_none() && inventory.as_whole().is_none() {
            // A write's partial model (a one-shot process) plans without the remembered state:
            // it renders its folders and writes only the pages whose bytes differ. The
            // persisted state is only a hint for skipping renders, and one-shot writes never
            // rewrite it, so it lags every folder they touched; reading it cost a scan of one
            // entry per folder of the vault (0.4 ms at 100,000 notes) to skip little.
            return catalog::plan(
                inventory,
                &self.policy,
                &CatalogState::default(),
                Some(dirs),
                &|p| self.read_page(p),
                &self.catalog_memo,
            );
        }
        if state.is_none() {
            *state = Some(self.load_catalog_state());
        }
        let previous = state.as_ref().expect("BUG: filled above");
        catalog::plan(inventory, &self.policy, previous, Some(dirs), &|p| self.read_page(p), &self.catalog_memo)
    }

    /// Takes in the renderer state of a partial plan of `planned` directories (a write's).
    pub(crate) fn merge_catalog_state(&self, partial: CatalogState, planned: &BTreeSet<String>) {
        if let Some(state) = self.catalog_state.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_mut() {
            state.merge(partial, planned);
        }
    }

    /// After a write put `changes` in place: the whole model holds its catalog pages as the
    /// engine wrote them (records analysed from those bytes, with no stamp, so the next look
    /// at the disk reads each file again), and the pages it removed are forgotten. When the
    /// watcher then reports them, a page whose bytes are still these is not parsed again
    /// (`inventory::reread_record`), and the remembered renderer state, which the write merged,
    /// stays trusted; a page someone changed since differs in a byte and is read as any
    /// outside edit. A write's partial model is left alone: it is dropped at the next look.
    pub(crate) fn hold_written_pages(&self, changes: &[crate::store::journal::FileChange]) {
        use crate::store::journal::FileChange;
        let mut guard = self.inventory.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Where an ignore file decides scope, only a walk says whether a page is in it.
        let super::model::Held::Whole(inventory) = &mut *guard else { return };
        if inventory.ignore_files {
            return;
        }
        for change in changes {
            let Ok(path) = VaultPath::parse_walked(change.path()) else { continue };
            let Some(kind) = crate::scan::classify(&self.policy, &path).filter(|k| matches!(k, PageKind::Catalog | PageKind::RootIndex))
            else {
                continue;
            };
            match change {
                FileChange::Write { text, .. } => {
                    let bytes = text.as_bytes();
                    let mut record = inventory::NoteRecord::empty(path, kind);
                    record.size_bytes = bytes.len() as u64;
                    record.content_hash = *blake3::hash(bytes).as_bytes();
                    inventory::analyse_bytes(&mut record, bytes, &self.policy);
                    inventory.upsert(record);
                }
                FileChange::Delete { .. } => {
                    inventory.remove(&path);
                }
                FileChange::Append { .. } => {}
            }
        }
    }

    /// Forgets the remembered catalog state; the next plan reloads it and re-verifies pages.
    pub(crate) fn invalidate_catalog_state(&self) {
        *self.catalog_state.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// The persisted renderer state (empty when missing or unreadable: every page is then
    /// rendered and compared with the disk).
    fn load_catalog_state(&self) -> CatalogState {
        let path = layout::join(&self.root, layout::CATALOG_STATE);
        let bytes = durable::read_engine_file(&self.root, &path).ok();
        bytes.and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
    }

    /// A catalog page's bytes for planning: `None` when missing; anything that is not a
    /// readable regular file of at most a page's size reads as bytes that are never ours, so
    /// the plan leaves it alone (a conflict where a page is wanted) instead of reading it
    /// whole, opening it blocking or writing over it.
    fn read_page(&self, path: &VaultPath) -> Option<Vec<u8>> {
        match self.page_on_disk(path.as_str()) {
            PageOnDisk::Missing => None,
            PageOnDisk::Page(bytes) => Some(bytes),
            PageOnDisk::Foreign(why) => Some(format!("{why}: never ours").into_bytes()),
        }
    }

    /// Reads the catalog page `rel`, bounded: a link, a FIFO or other special file, one larger
    /// than any page (the policy's note and page limits) or one that cannot be read is
    /// `Foreign`, and only its stat is taken.
    fn page_on_disk(&self, rel: &str) -> PageOnDisk {
        use std::io::Read;
        let limits = &self.policy.policy.limits;
        let limit = limits.note_bytes_max.max(limits.catalog_page_bytes_max as u64);
        // `open_read` refuses a link (`ELOOP`) and anything but a regular file, without blocking.
        let file = match crate::store::beneath::open_read(&self.root, rel) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return PageOnDisk::Missing,
            Err(e) if crate::store::nofollow::is_link_refusal(&e) => return PageOnDisk::Foreign("a symbolic link"),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => return PageOnDisk::Foreign("not a regular file"),
            Err(_) => return PageOnDisk::Foreign("unreadable"),
        };
        let mut bytes = Vec::new();
        match file.take(limit + 1).read_to_end(&mut bytes) {
            Err(_) => PageOnDisk::Foreign("unreadable"),
            Ok(_) if bytes.len() as u64 > limit => PageOnDisk::Foreign("larger than any catalog page"),
            Ok(_) => PageOnDisk::Page(bytes),
        }
    }

    /// Regenerates the catalogs of `dirs` only (plus the root index), or of every folder that
    /// changed; the caller holds the writer lock (`vault::Vault::regenerate_catalogs`).
    pub(crate) fn regenerate_catalogs_locked(&self, only_dirs: Option<&BTreeSet<String>>) -> Result<IndexReport> {
        let mut guard = self.lock_inventory()?;
        let inventory = guard.whole_mut().expect("BUG: lock_inventory loads the inventory");
        let mut state_guard = self.catalog_state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut previous = state_guard.take().unwrap_or_else(|| self.load_catalog_state());
        // A regeneration asked for renders and compares every page of the folders it renders,
        // trusting no remembered page fingerprint (a write's plan does).
        for dir in previous.dirs.values_mut() {
            dir.page_fingerprints.clear();
        }
        let mut plan = catalog::plan(inventory, &self.policy, &previous, only_dirs, &|p| self.read_page(p), &self.catalog_memo)?;
        if let Some(dirs) = only_dirs {
            let mut whole = previous.clone();
            whole.merge(std::mem::take(&mut plan.state), dirs);
            plan.state = whole;
        }
        let mut dirs_touched = BTreeSet::new();
        for (path, bytes) in &plan.writes {
            crate::store::beneath::replace_deferred_dir_sync(&self.root, path.as_str(), bytes)?;
            dirs_touched.insert(path.parent().to_string());
            let kind = if path.as_str() == layout::ROOT_INDEX { PageKind::RootIndex } else { PageKind::Catalog };
            let mut record = inventory::read_record(&self.root, path, kind, &self.policy);
            record.generated = true;
            inventory.upsert(record);
        }
        for dir in &dirs_touched {
            durable::fsync_dir(&layout::join(&self.root, dir)).map_err(|e| Error::io("syncing", dir.clone(), e))?;
        }
        for path in &plan.deletes {
            crate::store::beneath::remove_unsynced(&self.root, path.as_str())?;
            durable::fsync_dir(&layout::join(&self.root, path.parent())).map_err(|e| Error::io("syncing", path.parent().to_string(), e))?;
            inventory.remove(path);
        }
        if plan.state != previous || !layout::join(&self.root, layout::CATALOG_STATE).exists() {
            durable::create_dir_all(&self.root, &layout::join(&self.root, layout::STATE_DIR))?;
            let json =
                serde_json::to_vec(&plan.state).map_err(|e| Error::io("encoding", layout::CATALOG_STATE, std::io::Error::other(e)))?;
            durable::replace(&self.root, &layout::join(&self.root, layout::CATALOG_STATE), &json)?;
        }
        *state_guard = Some(plan.state);
        Ok(IndexReport {
            dirs_total: plan.dirs_total,
            dirs_rendered: plan.rendered_dirs,
            pages_written: plan.writes.iter().map(|(p, _)| p.to_string()).collect(),
            pages_deleted: plan.deletes.iter().map(ToString::to_string).collect(),
            conflicts: plan.conflicts.iter().map(ToString::to_string).collect(),
        })
    }

    fn category(&self, category: &str) -> Result<()> {
        if self.policy.policy.layout.catalog_categories.iter().any(|c| c == category) {
            Ok(())
        } else {
            Err(Error::InvalidArgument {
                name: "category",
                reason: format!("'{category}' is not one of: {}", self.policy.policy.layout.catalog_categories.join(", ")),
            })
        }
    }

    /// Reads page `page` (1-based) of a category's catalog; fails closed on a missing landing
    /// page, an undeclared page or a declared page that is missing.
    pub fn read_sub_index(&self, category: &str, page: usize) -> Result<String> {
        self.category(category)?;
        if page == 0 {
            return Err(Error::InvalidArgument { name: "page", reason: "pages are numbered from 1".into() });
        }
        let missing = |reason: String| Error::CatalogMissing { category: category.to_string(), reason };
        let landing = layout::join(&self.root, &format!("{category}/{}", layout::SUB_INDEX));
        let read_page = |rel: &str, absent: String| match self.page_on_disk(rel) {
            PageOnDisk::Page(bytes) => Ok(bytes),
            PageOnDisk::Missing => Err(missing(absent)),
            PageOnDisk::Foreign(why) => Err(missing(format!("{rel} is {why}; it is not read"))),
        };
        let landing = landing.strip_prefix(&self.root).unwrap_or(&landing).to_string_lossy().into_owned();
        let bytes = read_page(&landing, "no _index.md found; use ensure_sub_index to generate it".into())?;
        let pages = catalog::declared_pages(&bytes).map_err(missing)?;
        if page > pages {
            return Err(missing(format!("page {page} is not declared (the catalog has {pages} pages)")));
        }
        let path = format!("{category}/{}", layout::sub_index_page_name(page));
        let bytes = if page == 1 { bytes } else { read_page(&path, format!("page {page} is declared but missing"))? };
        String::from_utf8(bytes).map_err(|_| missing(format!("page {page} is not UTF-8")))
    }

    /// The folders of `category`'s catalog (`vault::Vault::ensure_sub_index` renders them).
    pub(crate) fn sub_index_dirs(&self, category: &str) -> Result<BTreeSet<String>> {
        self.category(category)?;
        let dirs: BTreeSet<String> = self.with_inventory(|inv| {
            catalog::tree(inv, &self.policy)
                .dirs()
                .into_iter()
                .filter(|d| d == category || d.starts_with(&format!("{category}/")))
                .collect()
        })?;
        if dirs.is_empty() {
            return Err(Error::CatalogMissing { category: category.to_string(), reason: "the folder has no catalogued notes".into() });
        }
        Ok(dirs)
    }
}

/// What a catalog page's name holds on disk (`VaultState::page_on_disk`).
enum PageOnDisk {
    Missing,
    Page(Vec<u8>),
    /// Not read: what it is instead.
    Foreign(&'static str),
}
