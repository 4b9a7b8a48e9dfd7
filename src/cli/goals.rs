//! `paravault goals …`: the stepstone operations from the command line, over the same
//! application service as the MCP surface (`crate::api::goals::run`); `--json` prints the envelope.

use clap::Subcommand;

use crate::api::goals::{
    AddInput, ApplyPlanInput, ConfirmedInput, Direction, GoalRequest, Lifecycle, MoveInput, SetActiveInput, UpdateInput,
};
use crate::error::Error;

/// A goals subcommand.
#[derive(Debug, Subcommand)]
pub enum GoalsCommand {
    /// Every goal in canonical order.
    List,
    /// One goal by ID or unique ID prefix.
    Show {
        /// The goal's ID or a unique prefix of it.
        id: String,
    },
    /// Goals whose title or description contains QUERY.
    Find {
        /// Text to look for in titles and descriptions (case-insensitive).
        query: String,
    },
    /// The first ready goal.
    Next,
    /// Every unblocked, unclaimed open goal.
    Ready,
    /// Open goals by dependency wave, and the unreachable ones.
    Waves,
    /// Add an open goal.
    Add {
        /// The goal's title.
        title: String,
        /// What done means for this goal.
        #[arg(long)]
        description: Option<String>,
        /// A group the goal belongs to (free text).
        #[arg(long)]
        group: Option<String>,
        /// A goal ID or unique prefix this goal waits for (repeatable).
        #[arg(long = "depends-on", value_name = "ID")]
        depends_on: Vec<String>,
        /// An absolute http(s) URL (repeatable).
        #[arg(long = "link", value_name = "URL")]
        links: Vec<String>,
    },
    /// Validate (--dry-run) or atomically add a JSON plan (docs/goals.md#json-goal-plans).
    ApplyPlan {
        /// The plan: a JSON array, or @FILE to read it from a file.
        plan: String,
        /// Only validate the plan: nothing is written.
        #[arg(long)]
        dry_run: bool,
    },
    /// Edit a goal; --depends-on / --link replace the whole set (--clear-… empties it).
    Update {
        /// The goal's ID or a unique prefix of it.
        id: String,
        /// A new title.
        #[arg(long)]
        title: Option<String>,
        /// A new description (replaces it).
        #[arg(long)]
        description: Option<String>,
        /// Text appended to the description.
        #[arg(long)]
        append_description: Option<String>,
        /// A new group.
        #[arg(long)]
        group: Option<String>,
        /// A goal ID or unique prefix this goal waits for (repeatable; replaces the set).
        #[arg(long = "depends-on", value_name = "ID")]
        depends_on: Vec<String>,
        /// Remove every dependency.
        #[arg(long, conflicts_with = "depends_on")]
        clear_depends_on: bool,
        /// An absolute http(s) URL (repeatable; replaces the set).
        #[arg(long = "link", value_name = "URL")]
        links: Vec<String>,
        /// Remove every link.
        #[arg(long, conflicts_with = "links")]
        clear_links: bool,
        /// The goal's `updated_at` as you last read it: refused if it changed since (another writer).
        #[arg(long)]
        expected_updated_at: Option<String>,
    },
    /// Move a goal: --up, --down, --before ID or --after ID.
    Move {
        /// The goal's ID or a unique prefix of it.
        id: String,
        /// One place earlier.
        #[arg(long, conflicts_with_all = ["down", "before", "after"])]
        up: bool,
        /// One place later.
        #[arg(long, conflicts_with_all = ["before", "after"])]
        down: bool,
        /// Just before this goal (ID or unique prefix).
        #[arg(long, conflicts_with = "after")]
        before: Option<String>,
        /// Just after this goal (ID or unique prefix).
        #[arg(long)]
        after: Option<String>,
        /// The goal's `updated_at` as you last read it: refused if it changed since (another writer).
        #[arg(long)]
        expected_updated_at: Option<String>,
    },
    /// Make an open goal the single active goal.
    SetActive {
        /// The goal's ID or a unique prefix of it.
        id: String,
        /// The goal's `updated_at` as you last read it: refused if it changed since (another writer).
        #[arg(long)]
        expected_updated_at: Option<String>,
    },
    /// Mark a goal done (needs --confirm).
    Complete(Confirmed),
    /// Reopen a done or archived goal (needs --confirm).
    Reopen(Confirmed),
    /// Archive a goal (needs --confirm).
    Archive(Confirmed),
    /// Permanently delete a goal (needs --confirm).
    Delete(Confirmed),
}

/// The arguments of a lifecycle subcommand.
#[derive(Debug, clap::Args)]
pub struct Confirmed {
    /// The goal's ID or a unique prefix of it.
    id: String,
    /// You explicitly want this exact action on this exact goal.
    #[arg(long)]
    confirm: bool,
    /// The goal's `updated_at` as you last read it: refused if it changed since (another writer).
    #[arg(long)]
    expected_updated_at: Option<String>,
}

fn set(values: &[String], clear: bool) -> Option<Vec<String>> {
    if clear { Some(Vec::new()) } else { Some(values.to_vec()).filter(|v| !v.is_empty()) }
}

fn confirmed(args: &Confirmed) -> ConfirmedInput {
    ConfirmedInput {
        id: args.id.clone(),
        confirm: args.confirm.then_some(serde_json::Value::Bool(true)),
        expected_updated_at: args.expected_updated_at.clone(),
    }
}

/// The service request a subcommand names (reading a `@FILE` plan is the only I/O).
pub fn request(command: &GoalsCommand) -> Result<GoalRequest, Error> {
    Ok(match command {
        GoalsCommand::List => GoalRequest::List,
        GoalsCommand::Show { id } => GoalRequest::Show { id: id.clone() },
        GoalsCommand::Find { query } => GoalRequest::Find { query: query.clone() },
        GoalsCommand::Next => GoalRequest::Next,
        GoalsCommand::Ready => GoalRequest::Ready,
        GoalsCommand::Waves => GoalRequest::Waves,
        GoalsCommand::Add { title, description, group, depends_on, links } => GoalRequest::Add(AddInput {
            title: title.clone(),
            description: description.clone(),
            group: group.clone(),
            depends_on: set(depends_on, false),
            links: set(links, false),
        }),
        GoalsCommand::ApplyPlan { plan, dry_run } => {
            let text = match plan.strip_prefix('@') {
                Some(file) => std::fs::read_to_string(file)
                    .map_err(|e| Error::InvalidArgument { name: "plan", reason: format!("cannot read {file}: {e}") })?,
                None => plan.clone(),
            };
            GoalRequest::ApplyPlan(ApplyPlanInput { plan: serde_json::Value::String(text), dry_run: Some(*dry_run) })
        }
        GoalsCommand::Update {
            id,
            title,
            description,
            append_description,
            group,
            depends_on,
            clear_depends_on,
            links,
            clear_links,
            expected_updated_at,
        } => GoalRequest::Update(UpdateInput {
            id: id.clone(),
            title: title.clone(),
            description: description.clone(),
            append_description: append_description.clone(),
            group: group.clone(),
            depends_on: set(depends_on, *clear_depends_on),
            links: set(links, *clear_links),
            expected_updated_at: expected_updated_at.clone(),
        }),
        GoalsCommand::Move { id, up, down, before, after, expected_updated_at } => GoalRequest::Move(MoveInput {
            id: id.clone(),
            direction: if *up {
                Some(Direction::Up)
            } else if *down {
                Some(Direction::Down)
            } else {
                None
            },
            before_id: before.clone(),
            after_id: after.clone(),
            expected_updated_at: expected_updated_at.clone(),
        }),
        GoalsCommand::SetActive { id, expected_updated_at } => {
            GoalRequest::SetActive(SetActiveInput { id: id.clone(), expected_updated_at: expected_updated_at.clone() })
        }
        GoalsCommand::Complete(args) => GoalRequest::Lifecycle(Lifecycle::Complete, confirmed(args)),
        GoalsCommand::Reopen(args) => GoalRequest::Lifecycle(Lifecycle::Reopen, confirmed(args)),
        GoalsCommand::Archive(args) => GoalRequest::Lifecycle(Lifecycle::Archive, confirmed(args)),
        GoalsCommand::Delete(args) => GoalRequest::Lifecycle(Lifecycle::Delete, confirmed(args)),
    })
}
