//! The lint and catalog tools: lint_vault, generate_index, read_sub_index and ensure_sub_index.

use super::*;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LintVault {}

impl ToolParams for LintVault {
    const NAME: &'static str = "lint_vault";
    const TITLE: &'static str = "Lint the vault";
    const DESCRIPTION: &'static str = "Run metadata, link, orphan and freshness checks over the whole vault. Read-only.";
    type Output = crate::api::lint::LintReport;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        ctx.vault.lint_vault()
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GenerateIndex {}

impl ToolParams for GenerateIndex {
    const NAME: &'static str = "generate_index";
    const TITLE: &'static str = "Regenerate catalogs";
    const DESCRIPTION: &'static str = "Regenerate index.md and every changed folder _index.md catalog. Hand-written catalogs are reported as conflicts, never overwritten.";
    type Output = crate::vault::IndexReport;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        ctx.vault.generate_index()
    }
}

fn patch_category(schema: &mut serde_json::Map<String, Value>, policy: &Policy) {
    set_enum(schema, "category", policy.layout.catalog_categories.clone());
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadSubIndex {
    /// A P.A.R.A. category folder.
    pub category: String,
    /// One-based catalog page (pages beyond 1 are declared by the landing page).
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub page: u32,
}

fn one() -> u32 {
    1
}

impl ToolParams for ReadSubIndex {
    const NAME: &'static str = "read_sub_index";
    const TITLE: &'static str = "Read a category catalog";
    const DESCRIPTION: &'static str =
        "Read one page of an existing P.A.R.A. category _index.md; never generates it. A missing or undeclared page fails closed.";
    type Output = crate::api::CatalogPage;
    fn patch_input_schema(schema: &mut serde_json::Map<String, Value>, policy: &Policy) {
        patch_category(schema, policy);
    }
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        ctx.vault.sub_index_page(self.category, self.page)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EnsureSubIndex {
    /// A P.A.R.A. category folder.
    pub category: String,
    /// One-based catalog page.
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub page: u32,
}

impl ToolParams for EnsureSubIndex {
    const NAME: &'static str = "ensure_sub_index";
    const TITLE: &'static str = "Generate and read a category catalog";
    const DESCRIPTION: &'static str =
        "Regenerate one P.A.R.A. category's catalog when needed (the folder must have notes), then return the requested page.";
    type Output = crate::api::CatalogPage;
    fn patch_input_schema(schema: &mut serde_json::Map<String, Value>, policy: &Policy) {
        patch_category(schema, policy);
    }
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        ctx.vault.ensured_sub_index_page(self.category, self.page)
    }
}
