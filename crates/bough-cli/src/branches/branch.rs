//! `bough branch`: create, delete, list, info and the tree of a partition's branches.

use super::*;

/// `bough branch ...`.
#[derive(Debug, Subcommand)]
pub enum BranchCmd {
    /// Create branch NAME from --from (default main); no data is copied.
    #[command(
        after_help = "Examples:\n  bough branch create feature orders.0 --from main\n  bough branch create feature --all-partitions orders --from main"
    )]
    Create {
        /// The new branch.
        name: String,
        /// TABLE.PART[@FROM] (or --all-partitions TABLE).
        #[arg(
            value_name = "TABLE.PART[@FROM]",
            required_unless_present = "all_partitions"
        )]
        target: Option<String>,
        /// The branch to fork from.
        #[arg(long, value_name = "BRANCH")]
        from: Option<String>,
        /// Create it on every partition of TABLE, all or nothing.
        #[arg(long, value_name = "TABLE", conflicts_with = "target")]
        all_partitions: Option<String>,
        /// The branch to fork from (same as --from).
        #[arg(long, short = 'b', value_name = "BRANCH")]
        branch: Option<String>,
    },
    /// Delete branch NAME (its data stays until `bough gc` finds nothing else needs it).
    #[command(
        after_help = "Examples:\n  bough branch delete feature orders.0\n  bough branch delete feature --all-partitions orders"
    )]
    Delete {
        /// The branch.
        name: String,
        /// TABLE.PART (or --all-partitions TABLE).
        #[arg(value_name = "TABLE.PART", required_unless_present = "all_partitions")]
        target: Option<String>,
        /// Delete it on every partition of TABLE that has it.
        #[arg(long, value_name = "TABLE", conflicts_with = "target")]
        all_partitions: Option<String>,
    },
    /// List branches of a partition, of every partition of a table, or of the whole store.
    #[command(
        after_help = "Examples:\n  bough branch list orders.0\n  bough branch list orders\n  bough branch list"
    )]
    List {
        /// TABLE.PART or TABLE (default: every partition).
        #[arg(value_name = "TABLE[.PART]")]
        scope: Option<String>,
    },
    /// Parent, fork point, term, creation time, files and archives of a branch.
    #[command(after_help = "Example:\n  bough branch info orders.0@feature")]
    Info(TargetArgs),
    /// Draw the branch hierarchy with fork points, terms, sizes and archives.
    #[command(after_help = "Example:\n  bough branch tree orders.0")]
    Tree {
        /// TABLE.PART.
        #[arg(value_name = "TABLE.PART")]
        partition: String,
    },
}

/// `bough branch ...`.
pub fn branch(ctx: &Ctx, cmd: BranchCmd) -> CliResult<()> {
    match cmd {
        BranchCmd::Create {
            name,
            target,
            from,
            all_partitions,
            branch,
        } => {
            target::branch_name(&name, "NAME")?;
            if let Some(table) = all_partitions {
                let from = resolve_branch(&[
                    ("--from", from.as_deref()),
                    ("--branch", branch.as_deref()),
                ])?;
                let store = ctx.open(false)?;
                let parts = store.table(&table)?.partitions()?;
                if parts.is_empty() {
                    return Err(CliError::not_found(format!(
                        "table `{table}` has no partitions"
                    )));
                }
                store.table(&table)?.create_branch(&name, &from)?;
                store.close()?;
                return done(
                    ctx,
                    &format!(
                        "created branch {name} from {from} on {} of table {table}",
                        plural(parts.len() as u64, "partition", "partitions")
                    ),
                    json!({"created": name, "from": from, "table": table, "partitions": parts}),
                );
            }
            let target = target.unwrap_or_default();
            let t = resolve(&target, branch.as_deref(), &[("--from", from.as_deref())])?;
            let store = ctx.open(false)?;
            let part = ctx::partition(&store, &t.table, t.partition, false)?;
            ctx::branch(&part, &t.branch)?;
            let created = part.create_branch(&name, &t.branch).map_err(|e| {
                let exists = e.kind() == bough::ErrorKind::AlreadyExists;
                let err = CliError::from(e);
                if exists {
                    err.hint(format!(
                        "choose another name, or delete the branch first: `bough branch delete {name} {}`",
                        t.dir()
                    ))
                } else {
                    err
                }
            })?;
            let info = part.describe(&name)?;
            let label = created.label().to_string();
            store.close()?;
            let fork = info.origin.as_ref().map_or(0, |o| o.fork_version);
            done(
                ctx,
                &format!(
                    "created {label} from {} at version {fork} (no data copied)",
                    t.branch
                ),
                json!({"created": label, "from": t.branch, "fork_version": fork}),
            )
        }
        BranchCmd::Delete {
            name,
            target,
            all_partitions,
        } => {
            target::branch_name(&name, "NAME")?;
            if let Some(table) = all_partitions {
                let store = ctx.open(false)?;
                store.table(&table)?.delete_branch(&name)?;
                store.close()?;
                return done(
                    ctx,
                    &format!(
                        "deleted branch {name} on every partition of {table}; run `bough gc` to free its files"
                    ),
                    json!({"deleted": name, "table": table}),
                );
            }
            let t = resolve(&target.unwrap_or_default(), None, &[("NAME", Some(&name))])?;
            let store = ctx.open(false)?;
            let part = ctx::partition(&store, &t.table, t.partition, false)?;
            ctx::branch(&part, &t.branch)?;
            let children = children_of(&part, &t.branch);
            part.delete_branch(&t.branch).map_err(|e| {
                let main = t.branch == "main";
                let err = CliError::from(e);
                if main {
                    err.hint("main cannot be deleted")
                } else {
                    err
                }
            })?;
            store.close()?;
            let mut text = format!(
                "deleted {}; run `bough gc` to free files nothing else references",
                t.label()
            );
            if !children.is_empty() {
                let one = children.len() == 1;
                let [were, are, they, them] = if one {
                    ["was", "is", "it keeps", "it as a root"]
                } else {
                    ["were", "are", "they keep", "them as roots"]
                };
                text.push_str(&format!(
                    "\n{} {were} forked from it and {are} unaffected: {they} every key, and the files \
                     borrowed from it stay until nothing needs them (`bough rehome` copies them \
                     over); `bough branch tree` now draws {them}",
                    children.join(", ")
                ));
            }
            done(
                ctx,
                &text,
                json!({"deleted": t.label(), "children": children}),
            )
        }
        BranchCmd::List { scope } => list(ctx, scope.as_deref()),
        BranchCmd::Info(a) => info(ctx, &a),
        BranchCmd::Tree { partition } => tree(ctx, &partition),
    }
}

/// The branches forked from `name` (their origin names it as the parent).
pub(crate) fn children_of(part: &PartitionHandle, name: &str) -> Vec<String> {
    let Ok(all) = part.branches() else {
        return Vec::new();
    };
    all.into_iter()
        .filter(|b| {
            part.describe(b).is_ok_and(|i| {
                i.origin
                    .as_ref()
                    .and_then(|o| o.parent.as_ref())
                    .is_some_and(|(p, _)| p.as_str() == name)
            })
        })
        .collect()
}

/// Everything `list`, `info` and `tree` show about one branch.
pub(crate) struct Described {
    info: BranchInfo,
    version: Option<u64>,
    files: u64,
    bytes: u64,
}

pub(crate) fn describe_all(
    store: &Store,
    root: &Path,
    p: &PartitionDir,
) -> CliResult<Vec<Described>> {
    let part = handle(store, p)?;
    let files = own_files(root, &p.to_string());
    let mut out = Vec::new();
    let described: Vec<(String, bough::Result<BranchInfo>)> = match part.describe_branches() {
        Ok(all) => all
            .into_iter()
            .map(|i| (i.name.to_string(), Ok(i)))
            .collect(),
        // One damaged branch fails the one-walk description: each is described on its own.
        Err(e) if e.kind() == bough::ErrorKind::Corruption => part
            .branches()?
            .into_iter()
            .map(|name| {
                let info = part.describe(&name);
                (name, info)
            })
            .collect(),
        Err(e) => return Err(e.into()),
    };
    for (name, info) in described {
        // One damaged branch must not hide the others: it is named, and skipped.
        let info = match info {
            Ok(info) => info,
            Err(e) if e.kind() == bough::ErrorKind::Corruption => {
                eprintln!(
                    "warning: {p}@{name} is damaged ({e}); `bough repair {p}@{name}` brings it back \
                     from its newest intact archive"
                );
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let version = part
            .branch(&name)
            .and_then(|b| b.read_view())
            .map(|v| v.version())
            .ok();
        let (f, b) = files.get(&name).copied().unwrap_or_default();
        out.push(Described {
            info,
            version,
            files: f,
            bytes: b,
        });
    }
    Ok(out)
}

pub(crate) fn parent_text(d: &Described) -> String {
    match d.info.origin.as_ref().and_then(|o| o.parent.as_ref()) {
        Some((name, term)) => format!("{name} (term {term})"),
        None => "-".into(),
    }
}

pub(crate) fn described_json(p: &PartitionDir, d: &Described) -> Json {
    let o = d.info.origin.as_ref();
    json!({
        "partition": p.to_string(),
        "branch": d.info.name.as_str(),
        "term": d.info.term,
        "version": d.version,
        "parent": o.and_then(|o| o.parent.as_ref()).map(|(n, _)| n.as_str()),
        "parent_term": o.and_then(|o| o.parent.as_ref()).map(|(_, t)| *t),
        "fork_version": o.map(|o| o.fork_version),
        "created_at_ms": o.map(|o| o.created_at_ms),
        "archives": d.info.archives.iter().map(|a| json!({"name": a.to_string(), "term": a.term, "timestamp_ms": a.timestamp})).collect::<Vec<_>>(),
        "data_files": d.files,
        "bytes": d.bytes,
        "staging": d.info.staging,
        "space": crate::space::space_json(d.info.space.as_ref()),
    })
}

/// The line `branch list` prints under the table for a staging branch.
pub(crate) fn staging_note(p: &PartitionDir, d: &Described) -> Option<String> {
    d.info.staging.as_ref().map(|purpose| {
        format!(
            "note: {p}@{} is the staging branch of an interrupted `{purpose}`; the next command \
             that writes to {p} (or `bough gc`) removes it",
            d.info.name
        )
    })
}

pub(crate) fn list(ctx: &Ctx, scope: Option<&str>) -> CliResult<()> {
    let store = ctx.open_read_only()?;
    let root = ctx.root()?;
    let parts = partitions_of_scope(ctx, &store, scope)?;
    let mut rows = Vec::new();
    let mut docs = Vec::new();
    let mut notes = Vec::new();
    for p in &parts {
        for d in describe_all(&store, &root, p)? {
            notes.extend(staging_note(p, &d));
            let o = d.info.origin.as_ref();
            rows.push(vec![
                p.to_string(),
                d.info.name.to_string(),
                d.info.term.to_string(),
                d.version.map_or("?".into(), |v| v.to_string()),
                parent_text(&d),
                o.filter(|o| o.parent.is_some())
                    .map_or("-".into(), |o| format!("v{}", o.fork_version)),
                o.map_or("-".into(), |o| output::time(o.created_at_ms)),
                d.info.archives.len().to_string(),
                format!("{} ({})", d.files, output::size(d.bytes)),
            ]);
            docs.push(described_json(p, &d));
        }
    }
    if ctx.json {
        return output::print_json(&json!({"branches": docs}));
    }
    print!(
        "{}",
        output::table(
            &[
                "PARTITION",
                "BRANCH",
                "TERM",
                "VERSION",
                "PARENT",
                "FORKED AT",
                "CREATED",
                "ARCHIVES",
                "OWN FILES"
            ],
            &rows
        )
    );
    for n in notes {
        println!("{n}");
    }
    Ok(())
}

pub(crate) fn info(ctx: &Ctx, a: &TargetArgs) -> CliResult<()> {
    let t = resolve(&a.target, a.branch.as_deref(), &[])?;
    let store = ctx.open_read_only()?;
    let root = ctx.root()?;
    let part = ctx::partition(&store, &t.table, t.partition, false)?;
    let branch = match ctx::branch(&part, &t.branch) {
        Ok(b) => b,
        Err(e) if e.code == crate::error::code::CORRUPT => {
            return Err(crate::repair::damaged_info(ctx, &part, &t, e)?);
        }
        Err(e) => return Err(e),
    };
    let p = part.dir().clone();
    let info = part.describe(&t.branch)?;
    let version = branch.read_view()?.version();
    let (files, bytes) = own_files(&root, &p.to_string())
        .get(&t.branch)
        .copied()
        .unwrap_or_default();
    let d = Described {
        info,
        version: Some(version),
        files,
        bytes,
    };
    if ctx.json {
        return output::print_json(&described_json(&p, &d));
    }
    let o = d.info.origin.as_ref();
    println!("branch     {}", t.label());
    println!("term       {}", d.info.term);
    println!("version    {version} (commits on this branch)");
    match o.and_then(|o| o.parent.as_ref().map(|p| (p, o.fork_version))) {
        Some(((parent, pterm), fork)) => {
            println!("parent     {parent} (term {pterm}), forked at its version {fork}")
        }
        None => println!("parent     - (a root branch)"),
    }
    if let Some(o) = o {
        println!("created    {}", output::time(o.created_at_ms));
    }
    println!(
        "own files  {} ({})",
        plural(files, "data file", "data files"),
        output::size(bytes)
    );
    crate::space::print_space(d.info.space.as_ref());
    println!("archives   {}", d.info.archives.len());
    for a in &d.info.archives {
        println!("  {a}  term {}  {}", a.term, output::time(a.timestamp));
    }
    Ok(())
}

/// `bough branch tree`: the hierarchy drawn from each branch's origin.
pub(crate) fn tree(ctx: &Ctx, partition: &str) -> CliResult<()> {
    let p = target::plain_partition(partition, "branch tree")?;
    let store = ctx.open_read_only()?;
    let root = ctx.root()?;
    ctx::partition(&store, p.table.as_str(), p.partition, false)?;
    let all = describe_all(&store, &root, &p)?;
    let names: Vec<String> = all.iter().map(|d| d.info.name.to_string()).collect();
    let parent_of = |d: &Described| -> Option<String> {
        d.info
            .origin
            .as_ref()
            .and_then(|o| o.parent.as_ref())
            .map(|(n, _)| n.to_string())
            .filter(|n| names.contains(n) && *n != d.info.name.as_str())
    };
    let mut children: BTreeMap<Option<String>, Vec<usize>> = BTreeMap::new();
    for (i, d) in all.iter().enumerate() {
        children.entry(parent_of(d)).or_default().push(i);
    }
    let key = |i: &usize| {
        let d = &all[*i];
        let o = d.info.origin.as_ref();
        (
            !d.info.name.is_main(),
            o.map_or(0, |o| o.fork_version),
            o.map_or(0, |o| o.created_at_ms),
            d.info.name.to_string(),
        )
    };
    for v in children.values_mut() {
        v.sort_by_key(key);
    }
    if ctx.json {
        fn node(
            i: usize,
            all: &[Described],
            children: &BTreeMap<Option<String>, Vec<usize>>,
            p: &PartitionDir,
        ) -> Json {
            let mut doc = described_json(p, &all[i]);
            let kids: Vec<Json> = children
                .get(&Some(all[i].info.name.to_string()))
                .map(|v| v.iter().map(|&k| node(k, all, children, p)).collect())
                .unwrap_or_default();
            if let Json::Object(m) = &mut doc {
                m.insert("children".into(), Json::Array(kids));
            }
            doc
        }
        let roots: Vec<Json> = children
            .get(&None)
            .map(|v| v.iter().map(|&i| node(i, &all, &children, &p)).collect())
            .unwrap_or_default();
        return output::print_json(&json!({"partition": p.to_string(), "roots": roots}));
    }
    let mut t = Drawing {
        all: &all,
        children: &children,
        names: &names,
        out: format!("{p}\n"),
    };
    for &r in children.get(&None).map(Vec::as_slice).unwrap_or_default() {
        t.draw(r, "", "", "");
    }
    print!("{}", t.out);
    Ok(())
}

/// The text of `branch tree`.
pub(crate) struct Drawing<'a> {
    all: &'a [Described],
    children: &'a BTreeMap<Option<String>, Vec<usize>>,
    names: &'a [String],
    out: String,
}

impl Drawing<'_> {
    /// Draws branch `i` after `lead` + `glyph`, and its archives and children (depth first)
    /// with `child_lead` before each of their lines.
    fn draw(&mut self, i: usize, lead: &str, glyph: &str, child_lead: &str) {
        let d = &self.all[i];
        let o = d.info.origin.as_ref();
        let mut line = format!("{lead}{glyph}● {}", d.info.name);
        match o.and_then(|o| o.parent.as_ref().map(|p| (p, o.fork_version))) {
            Some(((parent, pterm), fork)) if self.names.iter().any(|n| n == parent.as_str()) => {
                line.push_str(&format!("  ⑂ {parent}@v{fork}"));
                let now = self
                    .all
                    .iter()
                    .find(|x| x.info.name == *parent)
                    .map(|x| x.info.term);
                if now != Some(*pterm) {
                    line.push_str(&format!(" (its term {pterm})"));
                }
            }
            Some(((parent, _), fork)) => line.push_str(&format!("  ⑂ {parent}@v{fork} (deleted)")),
            None => {}
        }
        line.push_str(&format!(
            "  term {} · v{} · owns {}, {}",
            d.info.term,
            d.version.map_or("?".into(), |v| v.to_string()),
            plural(d.files, "file", "files"),
            output::size(d.bytes)
        ));
        if let Some(o) = o {
            line.push_str(&format!(" · {}", output::time(o.created_at_ms)));
        }
        self.out.push_str(&line);
        self.out.push('\n');
        let kids = self
            .children
            .get(&Some(d.info.name.to_string()))
            .cloned()
            .unwrap_or_default();
        let total = d.info.archives.len() + kids.len();
        let mut k = 0;
        for a in &d.info.archives {
            k += 1;
            let corner = if k == total { "└─" } else { "├─" };
            self.out.push_str(&format!(
                "{child_lead}{corner}◇ archive {a}  {}\n",
                output::time(a.timestamp)
            ));
        }
        for c in kids {
            k += 1;
            let last = k == total;
            let corner = if last { "└─" } else { "├─" };
            let next = format!("{child_lead}{}", if last { "  " } else { "│ " });
            self.draw(c, child_lead, corner, &next);
        }
    }
}
