//! Which state two branches last shared: the merge base of any two branches of a partition,
//! from the pair's own record or from the fork tree.
//!
//! **The rule.** A pair of branches that forked from one another, merged or were reset to
//! one another has a *pair base* in `MERGE_BASES` (recorded at the fork in the child, by each
//! merge and reset in the target); the newer of the two sides' records is the merge base.
//! Otherwise the merge base comes from the fork tree (each branch's `ORIGIN` parent, at the
//! parent's incarnation): the lowest common ancestor `L` of the two branches, at the version
//! of `L` both contain. Every child of `L` records the state of `L` it forked from as its base
//! naming `L` (moved forward by merges of `L` into it), with that state's version, so:
//!
//! - for each side, `h` is the child of `L` on the path up from that side's branch (none when
//!   the branch is `L` itself, the grandparent case), and `h`'s base naming `L` is at version
//!   `w`. It is in that side's history when the side's branch *is* `h` (whatever merged it
//!   there), or when it is still the fork state (`w` is `h`'s fork version): a branch forked
//!   from `h` before a later merge of `L` into `h` does not contain that merge;
//! - a side contains `L` up to version `m`: its base's `w` when that is in its history, else
//!   `h`'s fork version; `L` itself contains every version of its own;
//! - the merge base is the newest such base whose `w` is at most the other side's `m` (a
//!   branch's versions are one line of history, so `L` at `w ≤ m` is in both).
//!
//! No candidate means no common state is retained: the refusal ([`NoCommonState`]) names the
//! state that would have been needed — `L` at the earlier fork — and why it is gone (a re-home
//! or restore of the child holding it dropped its bases, or a later merge moved that base on).
//! A base recorded before bases carried their state's version is used only as a fork state
//! (recorded at the child's creation time).

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use bough_io::{IoError, IoResult};
use bough_manifest::{BranchOrigin, MergeBase, merge_bases, replay};
use bough_names::{BranchName, ManifestName, Term};
use bough_tree::head::MAX_MANIFEST_BYTES;

use crate::Partition;

/// What the lineage needs of one live branch.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    /// The first term of its current incarnation.
    first_term: Term,
    origin: Option<BranchOrigin>,
    bases: Vec<MergeBase>,
}

/// How a merge base was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaseRoute {
    /// Recorded for this pair: one forked from the other, or they merged or were reset.
    Pair,
    /// Through the fork tree: the state of `ancestor` that `via`, a child of it on one
    /// side's path, records (see the module docs of `lineage`).
    Lineage {
        /// The lowest common ancestor.
        ancestor: BranchName,
        /// The child of `ancestor` whose merge base it is.
        via: BranchName,
    },
}

/// The merge base a merge, rebase or the lineage resolver chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeBaseInfo {
    /// The branch the base is a state of.
    pub branch: BranchName,
    /// That branch's version at the state (`None` for a base recorded before bases kept it).
    pub version: Option<u64>,
    /// Whose manifest records it.
    pub holder: BranchName,
    /// Pair record or fork tree.
    pub route: BaseRoute,
}

/// Why the state a merge would need is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseCause {
    /// The child holding it records no base naming the ancestor any more: a re-home or a
    /// restore of that child dropped its merge bases.
    Dropped,
    /// A later merge of the ancestor into that child (or a reset of the child to it) moved
    /// the base on to this version, which the other side does not contain.
    Moved {
        /// The version the base was moved to (`None`: a base without a version).
        to: Option<u64>,
    },
}

/// A merge refused because the two branches have no common state retained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoCommonState {
    /// No fork or merge connects them as far as the live branches tell: their fork trees do
    /// not meet and no merge between them is recorded.
    Unrelated {
        /// The target.
        a: BranchName,
        /// The source.
        b: BranchName,
        /// The root each one's fork tree reaches.
        roots: (BranchName, BranchName),
    },
    /// They share history through `ancestor`, but the state needed is gone.
    Released {
        /// The target.
        a: BranchName,
        /// The source.
        b: BranchName,
        /// Their lowest common ancestor in the fork tree.
        ancestor: BranchName,
        /// The ancestor's version at the earlier fork (`None` when not recorded: a branch
        /// made from an archive).
        version: Option<u64>,
        /// The children of `ancestor` the two sides descend from (one, in the grandparent
        /// case), in the order `a`'s side, `b`'s side.
        forked: Vec<BranchName>,
        /// The child that held the state.
        holder: BranchName,
        /// What released it.
        cause: ReleaseCause,
    },
}

impl fmt::Display for NoCommonState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoCommonState::Unrelated { a, b, roots } => write!(
                f,
                "`{a}` and `{b}` share no history: neither was forked from the other, their \
                 fork trees do not meet (they go back to `{}` and `{}`), and no merge or reset \
                 between them is recorded; a merge needs a state the two shared",
                roots.0, roots.1
            ),
            NoCommonState::Released {
                a,
                b,
                ancestor,
                version,
                forked,
                holder,
                cause,
            } => {
                let at = version.map_or(String::new(), |v| format!(" at version {v}"));
                // The side that is not the ancestor, for the grandparent case.
                let below = if a == ancestor { b } else { a };
                let how = match forked.as_slice() {
                    [one] if one == below => {
                        format!("where `{one}` was forked from `{ancestor}`")
                    }
                    [one] => format!(
                        "where `{one}` was forked from `{ancestor}` (`{below}` descends from \
                         `{one}`)"
                    ),
                    [x, y] if x == a && y == b => format!("where `{a}` and `{b}` forked"),
                    [x, y] => {
                        format!("where `{x}` and `{y}` forked (`{a}` and `{b}` descend from them)")
                    }
                    _ => String::new(),
                };
                let why = match cause {
                    ReleaseCause::Dropped => format!(
                        "was released by the re-home (or a restore) of `{holder}`, which drops \
                         its merge bases (a re-home keeps them with `keep_merge_bases`: \
                         `bough rehome --keep-merge-bases`)"
                    ),
                    ReleaseCause::Moved { to } => format!(
                        "is no longer kept: a later merge of `{ancestor}` into `{holder}` (or a \
                         reset) moved `{holder}`'s merge base on to {}, which the other side \
                         does not contain",
                        to.map_or("a newer state".to_string(), |v| format!("version {v}"))
                    ),
                };
                write!(
                    f,
                    "cannot merge `{b}` and `{a}`: the state of `{ancestor}`{at} {how} is the \
                     last they share, and it {why}"
                )
            }
        }
    }
}

impl std::error::Error for NoCommonState {}

impl From<NoCommonState> for IoError {
    fn from(e: NoCommonState) -> IoError {
        IoError::InvalidArgument {
            what: e.to_string(),
        }
    }
}

/// The version a merge base's state records (`None`: recorded before bases kept it).
pub(crate) fn base_version(b: &MergeBase) -> Option<u64> {
    bough_manifest::commit_version(&b.state.extensions)
        .ok()
        .flatten()
}

/// The branches of a partition as far as merges need them, loaded on demand.
pub(crate) struct Lineage<'p> {
    part: &'p Partition,
    /// `None`: not live (deleted, or never existed).
    nodes: HashMap<BranchName, Option<Node>>,
}

/// A found base, with where it was found.
pub(crate) type Found = (MergeBase, MergeBaseInfo);

impl<'p> Lineage<'p> {
    pub(crate) fn new(part: &'p Partition) -> Self {
        Lineage {
            part,
            nodes: HashMap::new(),
        }
    }

    /// Uses `exts` for `branch` instead of its manifest on storage (a head's or a
    /// snapshot's, which may be newer than what another reader would find).
    pub(crate) fn with_extensions(
        &mut self,
        branch: &BranchName,
        exts: &[(u64, Vec<u8>)],
    ) -> IoResult<()> {
        let node = match self.part.incarnation_of(branch)? {
            Some(first_term) => Some(node_from(self.part, first_term, exts)?),
            None => None,
        };
        self.nodes.insert(branch.clone(), node);
        Ok(())
    }

    /// Forgets `branch`'s merge bases (what a re-home would do), for "what would it break".
    pub(crate) fn drop_bases(&mut self, branch: &BranchName) -> IoResult<()> {
        self.node(branch)?;
        if let Some(Some(n)) = self.nodes.get_mut(branch) {
            n.bases.clear();
        }
        Ok(())
    }

    pub(crate) fn node(&mut self, branch: &BranchName) -> IoResult<Option<&Node>> {
        if !self.nodes.contains_key(branch) {
            let node = match self.part.incarnation_of(branch)? {
                Some(first_term) => {
                    let exts = self.part.stored_extensions(branch)?;
                    Some(node_from(self.part, first_term, &exts)?)
                }
                None => None,
            };
            self.nodes.insert(branch.clone(), node);
        }
        Ok(self.nodes.get(branch).and_then(Option::as_ref))
    }

    /// The live parent of `branch` (at its current incarnation) and `branch`'s origin.
    fn parent(&mut self, branch: &BranchName) -> IoResult<Option<(BranchName, BranchOrigin)>> {
        let Some(origin) = self.node(branch)?.and_then(|n| n.origin.clone()) else {
            return Ok(None);
        };
        let Some((parent, term)) = origin.parent.clone() else {
            return Ok(None);
        };
        // A parent deleted (or deleted and created again) is not this branch's parent.
        match self.node(&parent)? {
            Some(p) if term >= p.first_term => Ok(Some((parent, origin))),
            _ => Ok(None),
        }
    }

    /// `branch` and its ancestors, nearest first (a loop in damaged origins ends it).
    fn chain(&mut self, branch: &BranchName) -> IoResult<Vec<BranchName>> {
        let mut out = vec![branch.clone()];
        let mut seen: BTreeSet<BranchName> = out.iter().cloned().collect();
        let mut at = branch.clone();
        while let Some((p, _)) = self.parent(&at)? {
            if !seen.insert(p.clone()) {
                break;
            }
            out.push(p.clone());
            at = p;
        }
        Ok(out)
    }

    /// The base `holder` records naming `other` at `other`'s current incarnation.
    fn base_naming(
        &mut self,
        holder: &BranchName,
        other: &BranchName,
    ) -> IoResult<Option<MergeBase>> {
        let since = match self.node(other)? {
            Some(n) => n.first_term,
            None => return Ok(None),
        };
        Ok(self.node(holder)?.and_then(|n| {
            n.bases
                .iter()
                .filter(|b| &b.branch == other && b.state.meta.term >= since)
                .max_by_key(|b| b.recorded_at_ms)
                .cloned()
        }))
    }

    /// The pair base of `target` and `source`: the newer of the two records (the source's
    /// on a tie).
    fn pair(&mut self, target: &BranchName, source: &BranchName) -> IoResult<Option<Found>> {
        let t = self.base_naming(target, source)?;
        let s = self.base_naming(source, target)?;
        let pick = match (t, s) {
            (Some(t), Some(s)) if t.recorded_at_ms > s.recorded_at_ms => Some((t, target)),
            (_, Some(s)) => Some((s, source)),
            (Some(t), None) => Some((t, target)),
            (None, None) => None,
        };
        Ok(pick.map(|(b, holder)| {
            let info = MergeBaseInfo {
                branch: b.branch.clone(),
                version: base_version(&b),
                holder: holder.clone(),
                route: BaseRoute::Pair,
            };
            (b, info)
        }))
    }

    /// The merge base of `target` and `source` (see the module docs), or why there is none.
    pub(crate) fn resolve(
        &mut self,
        target: &BranchName,
        source: &BranchName,
    ) -> IoResult<Result<Found, NoCommonState>> {
        if let Some(found) = self.pair(target, source)? {
            return Ok(Ok(found));
        }
        self.through_fork_tree(target, source)
    }

    /// The fork tree's merge base of `target` and `source` (step 2 of the rule), ignoring
    /// any pair record.
    fn through_fork_tree(
        &mut self,
        target: &BranchName,
        source: &BranchName,
    ) -> IoResult<Result<Found, NoCommonState>> {
        let (ct, cs) = (self.chain(target)?, self.chain(source)?);
        let Some(l) = ct.iter().find(|x| cs.contains(x)).cloned() else {
            let root = |c: &[BranchName]| c.last().cloned().unwrap_or_else(BranchName::main);
            return Ok(Err(NoCommonState::Unrelated {
                a: target.clone(),
                b: source.clone(),
                roots: (root(&ct), root(&cs)),
            }));
        };
        let sides = [self.side(target, &ct, &l)?, self.side(source, &cs, &l)?];
        // What each side contains of `l`: all of it for `l` itself.
        let reach = |s: &Option<Side>| s.as_ref().map_or(u64::MAX, |s| s.reach());
        let [t_side, s_side] = &sides;
        let (rt, rs) = (reach(t_side), reach(s_side));
        let mut best: Option<(u64, Found)> = None;
        for (i, side) in sides.iter().enumerate() {
            let other_reach = if i == 0 { rs } else { rt };
            let Some(s) = side else { continue };
            let (Some(base), Some(w)) = (&s.base, s.base_at()) else {
                continue;
            };
            if !s.base_in_history() || w > other_reach {
                continue;
            }
            if best.as_ref().is_none_or(|(bw, _)| w > *bw) {
                let info = MergeBaseInfo {
                    branch: l.clone(),
                    version: Some(w),
                    holder: s.hop.clone(),
                    route: BaseRoute::Lineage {
                        ancestor: l.clone(),
                        via: s.hop.clone(),
                    },
                };
                best = Some((w, (base.clone(), info)));
            }
        }
        if let Some((_, found)) = best {
            return Ok(Ok(found));
        }
        // The state needed: `l` at the earlier fork; the child that forked first held it.
        let needed = sides
            .iter()
            .flatten()
            .min_by_key(|s| s.fork_version.unwrap_or(0))
            .cloned();
        let forked: Vec<BranchName> = sides.iter().flatten().map(|s| s.hop.clone()).collect();
        let Some(needed) = needed else {
            // Both sides are `l`: the same branch; callers refuse that before.
            return Err(IoError::InvalidArgument {
                what: format!("{target} and {source} are the same branch"),
            });
        };
        let cause = match &needed.base {
            None => ReleaseCause::Dropped,
            Some(b) => ReleaseCause::Moved {
                to: base_version(b),
            },
        };
        Ok(Err(NoCommonState::Released {
            a: target.clone(),
            b: source.clone(),
            ancestor: l,
            version: needed.fork_version,
            forked,
            holder: needed.hop,
            cause,
        }))
    }

    /// One side's way up to `l`: the child of `l` on `chain`, its fork version and its base
    /// naming `l`. `None` when `end` is `l`.
    fn side(
        &mut self,
        end: &BranchName,
        chain: &[BranchName],
        l: &BranchName,
    ) -> IoResult<Option<Side>> {
        let Some(pos) = chain.iter().position(|x| x == l) else {
            return Ok(None);
        };
        let Some(hop) = pos.checked_sub(1).and_then(|p| chain.get(p)).cloned() else {
            return Ok(None);
        };
        let origin = self
            .node(&hop)?
            .and_then(|n| n.origin.clone())
            .ok_or_else(|| IoError::InvalidArgument {
                what: format!("{hop} has no origin but a parent was found"),
            })?;
        let base = self.base_naming(&hop, l)?;
        // The base recorded at the branch's creation is its fork state. A branch made from
        // an archive records fork version 0: its fork state's own version tells then.
        let is_fork_state = base.as_ref().is_some_and(|b| match base_version(b) {
            Some(w) if origin.fork_version != 0 => w == origin.fork_version,
            _ => b.recorded_at_ms == origin.created_at_ms,
        });
        let fork_version = if origin.fork_version != 0 {
            Some(origin.fork_version)
        } else if is_fork_state {
            base.as_ref().and_then(base_version)
        } else {
            None
        };
        Ok(Some(Side {
            hop: hop.clone(),
            is_end: &hop == end,
            fork_version,
            is_fork_state,
            base,
        }))
    }

    /// Every live branch, with its chain (for "which merges would a re-home break").
    pub(crate) fn live(&mut self) -> IoResult<Vec<BranchName>> {
        let names = self.part.branches()?;
        for n in &names {
            self.node(n)?;
        }
        Ok(names)
    }

    /// The branches whose fork chain passes through `branch` (it included).
    pub(crate) fn subtree(&mut self, branch: &BranchName) -> IoResult<Vec<BranchName>> {
        let mut out = Vec::new();
        for n in self.live()? {
            if self.chain(&n)?.contains(branch) {
                out.push(n);
            }
        }
        Ok(out)
    }
}

/// One side of a lineage resolution.
#[derive(Debug, Clone)]
struct Side {
    /// The child of the common ancestor on this side's path.
    hop: BranchName,
    /// The side's branch is `hop` itself.
    is_end: bool,
    /// The ancestor's version where `hop` forked (`None`: not recorded).
    fork_version: Option<u64>,
    /// `hop`'s base naming the ancestor is still its fork state.
    is_fork_state: bool,
    base: Option<MergeBase>,
}

impl Side {
    /// The version of the ancestor `hop`'s base is at.
    fn base_at(&self) -> Option<u64> {
        let b = self.base.as_ref()?;
        base_version(b).or(if self.is_fork_state {
            self.fork_version
        } else {
            None
        })
    }

    /// Whether the side's branch contains `hop`'s base.
    fn base_in_history(&self) -> bool {
        self.base.is_some() && (self.is_end || self.is_fork_state)
    }

    /// The newest version of the ancestor the side's branch is known to contain.
    fn reach(&self) -> u64 {
        match self.base_at() {
            Some(w) if self.base_in_history() => w,
            _ => self.fork_version.unwrap_or(0),
        }
    }
}

fn node_from(part: &Partition, first_term: Term, exts: &[(u64, Vec<u8>)]) -> IoResult<Node> {
    let bad = |r| IoError::corruption(part.files().dir(), 0, format!("lineage: {r:?}"));
    Ok(Node {
        first_term,
        origin: BranchOrigin::from_extensions(exts).map_err(bad)?,
        bases: merge_bases(exts).map_err(bad)?,
    })
}

impl Partition {
    /// The first term of the live incarnation of `branch` (`None`: not live).
    pub(crate) fn incarnation_of(&self, branch: &BranchName) -> IoResult<Option<Term>> {
        Ok(self
            .current_term(branch)?
            .filter(|ct| !ct.deleted)
            .map(|ct| ct.first_term))
    }

    /// The manifest extensions of a live branch as its manifest on storage holds them.
    pub(crate) fn stored_extensions(&self, branch: &BranchName) -> IoResult<Vec<(u64, Vec<u8>)>> {
        let term = self.live_term(branch)?;
        let path = self
            .files()
            .path_of(&ManifestName::new(branch.clone(), term).to_string());
        let bytes = self.storage().read_file(&path, MAX_MANIFEST_BYTES)?;
        Ok(replay(&bytes)
            .map_err(|e| IoError::corruption(path, e.offset, e.to_string()))?
            .state
            .extensions)
    }
}

/// Most pairs a re-home report lists; the rest are counted.
pub(crate) const MAX_LOST_LISTED: usize = 1000;

/// The pairs of live branches whose merge base `resolve` finds in `before` but not in
/// `after` (`after`: the same branches with `branch`'s merge bases dropped), at most
/// [`MAX_LOST_LISTED`] of them in name order, and how many more there are.
///
/// A base `branch` holds serves two kinds of pairs only: `branch` with a branch it names (a
/// pair record), and — its base naming its parent `P` — pairs of `branch` or a branch below
/// it with a branch outside its subtree whose lowest common ancestor is `P`. For the second
/// kind every branch strictly below `branch` resolves alike (its path reaches `P` through
/// `branch`, never as the child of `P` itself) unless it has a pair record with the other
/// side, so one of them stands for all: the work is one resolution per live branch (twice),
/// not one per pair.
pub(crate) fn lost_pairs(
    before: &mut Lineage<'_>,
    after: &mut Lineage<'_>,
    branch: &BranchName,
) -> IoResult<(Vec<(BranchName, BranchName)>, u64)> {
    let sub: BTreeSet<BranchName> = before.subtree(branch)?.into_iter().collect();
    let below: Vec<BranchName> = sub.iter().filter(|n| *n != branch).cloned().collect();
    let all = before.live()?;
    let mut lost: BTreeSet<(BranchName, BranchName)> = BTreeSet::new();
    let mut more = 0u64;
    let mut add = |lost: &mut BTreeSet<_>, a: &BranchName, b: &BranchName| {
        let pair = if a < b {
            (a.clone(), b.clone())
        } else {
            (b.clone(), a.clone())
        };
        if lost.len() < MAX_LOST_LISTED {
            lost.insert(pair);
        } else if !lost.contains(&pair) {
            more += 1;
        }
    };
    for other in &all {
        if other == branch {
            continue;
        }
        // `branch` itself, with anyone (a pair record it holds, or its fork state).
        if before.resolve(branch, other)?.is_ok() && after.resolve(branch, other)?.is_err() {
            add(&mut lost, branch, other);
        }
        // The branches below it, with a branch outside its subtree.
        let Some(rep) = below.first() else { continue };
        if sub.contains(other) {
            continue;
        }
        if before.through_fork_tree(rep, other)?.is_ok()
            && after.through_fork_tree(rep, other)?.is_err()
        {
            for a in &below {
                if after.pair(a, other)?.is_none() {
                    add(&mut lost, a, other);
                }
            }
        }
    }
    Ok((lost.into_iter().collect(), more))
}
