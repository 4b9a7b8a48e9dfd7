//! Dependency analysis of a worklist: which goals are blocked, which goals each one blocks,
//! the ready frontier, the next goal, and the dependency waves (docs/goals.md#semantics).
//!
//! One pass over the goals and their `dependsOn` edges, O(goals + edges): wave *k* holds the
//! open goals whose open dependencies all sit in waves below *k* and one of them in *k − 1*;
//! an open goal with a missing or archived dependency, in a cycle, or depending on such a
//! goal is unreachable, with its reasons.

use std::collections::{HashMap, VecDeque};

use super::{Goal, GoalStatus, Worklist};

/// Why an open goal can never become ready as the worklist stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreachable {
    /// A `dependsOn` entry names no goal.
    MissingDependency(String),
    /// A dependency is archived (it will never be done unless reopened).
    ArchivedDependency(String),
    /// The goal is in a dependency cycle, or depends on one.
    Cycle,
    /// A dependency is itself unreachable.
    UnreachableDependency(String),
}

impl Unreachable {
    /// The JSON form: `{reason, goalId?}`.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        match self {
            Unreachable::MissingDependency(id) => json!({"reason": "missing-dependency", "goalId": id}),
            Unreachable::ArchivedDependency(id) => json!({"reason": "archived-dependency", "goalId": id}),
            Unreachable::Cycle => json!({"reason": "cycle"}),
            Unreachable::UnreachableDependency(id) => json!({"reason": "unreachable-dependency", "goalId": id}),
        }
    }
}

/// The analysis of one worklist, indexed like `worklist.goals`.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// Whether a dependency is not done.
    pub blocked: Vec<bool>,
    /// Open goals naming this goal in `dependsOn` (empty for a done goal), in file order.
    pub blocks: Vec<Vec<usize>>,
    /// The wave of each open, reachable goal.
    pub wave: Vec<Option<usize>>,
    /// The reasons of each open, unreachable goal (empty otherwise).
    pub unreachable: Vec<Vec<Unreachable>>,
}

impl Analysis {
    /// Analyses the worklist.
    pub fn of(worklist: &Worklist) -> Self {
        let goals = &worklist.goals;
        let n = goals.len();
        let index: HashMap<&str, usize> = goals.iter().enumerate().map(|(i, g)| (g.id.as_str(), i)).collect();
        let mut blocked = vec![false; n];
        let mut blocks = vec![Vec::new(); n];
        let mut unreachable = vec![Vec::new(); n];
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut open_deps = vec![0usize; n];
        for (i, goal) in goals.iter().enumerate() {
            for dep in &goal.depends_on {
                match index.get(dep.as_str()).map(|&d| (d, goals[d].status)) {
                    None => {
                        blocked[i] = true;
                        unreachable[i].push(Unreachable::MissingDependency(dep.clone()));
                    }
                    Some((_, GoalStatus::Done)) => {}
                    Some((d, status)) => {
                        blocked[i] = true;
                        if goal.status == GoalStatus::Open {
                            if blocks[d].last() != Some(&i) {
                                blocks[d].push(i);
                            }
                            if status == GoalStatus::Archived {
                                unreachable[i].push(Unreachable::ArchivedDependency(dep.clone()));
                            } else {
                                dependents[d].push(i);
                                open_deps[i] += 1;
                            }
                        }
                    }
                }
            }
        }
        for (i, goal) in goals.iter().enumerate() {
            if goal.status != GoalStatus::Open {
                unreachable[i].clear();
            }
        }
        // Kahn's algorithm over the open goals: a goal is placed once all its open
        // dependencies are; an unreachable goal passes its state on to its dependents.
        let mut wave = vec![None; n];
        let mut reachable = vec![true; n];
        let mut queue: VecDeque<usize> = (0..n).filter(|&i| goals[i].status == GoalStatus::Open && open_deps[i] == 0).collect();
        let mut placed = vec![false; n];
        let mut level = vec![0usize; n];
        while let Some(i) = queue.pop_front() {
            placed[i] = true;
            if unreachable[i].is_empty() && reachable[i] {
                wave[i] = Some(level[i]);
            } else {
                reachable[i] = false;
            }
            for &j in &dependents[i] {
                if reachable[i] {
                    level[j] = level[j].max(level[i] + 1);
                } else if reachable[j] {
                    reachable[j] = false;
                    unreachable[j].push(Unreachable::UnreachableDependency(goals[i].id.clone()));
                }
                open_deps[j] -= 1;
                if open_deps[j] == 0 {
                    queue.push_back(j);
                }
            }
        }
        for i in 0..n {
            if goals[i].status == GoalStatus::Open && !placed[i] {
                unreachable[i].push(Unreachable::Cycle);
            }
        }
        for (i, goal) in goals.iter().enumerate() {
            if goal.status == GoalStatus::Done {
                blocks[i].clear();
            }
        }
        Analysis { blocked, blocks, wave, unreachable }
    }

    /// Whether the goal is in the ready frontier: open, unblocked and unclaimed (not active).
    pub(crate) fn is_ready(&self, goals: &[Goal], i: usize) -> bool {
        goals[i].status == GoalStatus::Open && !goals[i].active && !self.blocked[i]
    }

    /// The ready goals, in canonical (file) order.
    pub fn ready(&self, goals: &[Goal]) -> Vec<usize> {
        (0..goals.len()).filter(|&i| self.is_ready(goals, i)).collect()
    }

    /// The first ready goal in canonical order.
    pub fn next(&self, goals: &[Goal]) -> Option<usize> {
        (0..goals.len()).find(|&i| self.is_ready(goals, i))
    }

    /// The waves (each in file order) and the unreachable open goals (in file order).
    pub fn waves(&self, goals: &[Goal]) -> (Vec<Vec<usize>>, Vec<usize>) {
        let depth = self.wave.iter().flatten().max().map_or(0, |m| m + 1);
        let mut waves = vec![Vec::new(); depth];
        let mut unreachable = Vec::new();
        for (i, goal) in goals.iter().enumerate() {
            if goal.status != GoalStatus::Open {
                continue;
            }
            match self.wave[i] {
                Some(w) => waves[w].push(i),
                None => unreachable.push(i),
            }
        }
        (waves, unreachable)
    }
}
