//! `bough tag`: create, delete, list tags, and read a key of one.

use super::*;

/// `bough tag ...`.
#[derive(Debug, Subcommand)]
pub enum TagCmd {
    /// Tag the latest commit of a branch as NAME: an immutable state, kept until deleted.
    #[command(
        after_help = "Examples:\n  bough tag create v1 orders.0@main\n  bough tag create v1 orders.0 --from feature"
    )]
    Create {
        /// The tag (branch-name rules; no branch or tag may have the same name).
        name: String,
        /// TABLE.PART[@BRANCH].
        #[arg(value_name = "TABLE.PART[@BRANCH]")]
        target: String,
        /// The branch to tag (default main).
        #[arg(long, short = 'b', value_name = "BRANCH")]
        from: Option<String>,
    },
    /// Delete tag NAME (its data stays until `bough gc` finds nothing else needs it).
    #[command(after_help = "Example:\n  bough tag delete v1 orders.0")]
    Delete {
        /// The tag.
        name: String,
        /// TABLE.PART.
        #[arg(value_name = "TABLE.PART")]
        target: String,
    },
    /// List the tags of a partition with the branch and version each was taken from.
    #[command(after_help = "Example:\n  bough tag list orders.0")]
    List {
        /// TABLE.PART.
        #[arg(value_name = "TABLE.PART")]
        target: String,
    },
    /// Print the value of KEY in tag NAME.
    #[command(after_help = "Example:\n  bough tag get v1 orders.0 order-1")]
    Get {
        /// The tag.
        name: String,
        /// TABLE.PART.
        #[arg(value_name = "TABLE.PART")]
        target: String,
        /// The key.
        key: String,
        /// KEY is hex, and the value is printed as hex.
        #[arg(long)]
        hex: bool,
    },
}

fn tag_json(p: &PartitionDir, t: &bough::TagInfo) -> Json {
    json!({
        "partition": p.to_string(),
        "tag": t.name.as_str(),
        "branch": t.branch.as_str(),
        "term": t.term,
        "version": t.version,
        "created_at_ms": t.created_at_ms,
    })
}

/// `bough tag ...`.
pub fn tag(ctx: &Ctx, cmd: TagCmd) -> CliResult<()> {
    match cmd {
        TagCmd::Create { name, target, from } => {
            target::branch_name(&name, "NAME")?;
            let t = resolve(&target, from.as_deref(), &[])?;
            let store = ctx.open(false)?;
            let part = ctx::partition(&store, &t.table, t.partition, false)?;
            ctx::branch(&part, &t.branch)?;
            let info = part.create_tag(&name, &t.branch).map_err(|e| {
                let exists = e.kind() == bough::ErrorKind::AlreadyExists;
                let err = CliError::from(e);
                if exists {
                    err.hint("branches and tags share one name space: choose another name")
                } else {
                    err
                }
            })?;
            let p = part.dir().clone();
            store.close()?;
            done(
                ctx,
                &format!(
                    "tagged {} at version {} as {name} (no data copied)",
                    t.label(),
                    info.version
                ),
                tag_json(&p, &info),
            )
        }
        TagCmd::Delete { name, target } => {
            target::branch_name(&name, "NAME")?;
            let p = target::plain_partition(&target, "tag delete")?;
            let store = ctx.open(false)?;
            let part = ctx::partition(&store, p.table.as_str(), p.partition, false)?;
            part.delete_tag(&name)?;
            store.close()?;
            done(
                ctx,
                &format!(
                    "deleted tag {name} of {p}; run `bough gc` to free files nothing else references"
                ),
                json!({"partition": p.to_string(), "deleted": name}),
            )
        }
        TagCmd::List { target } => {
            let p = target::plain_partition(&target, "tag list")?;
            let store = ctx.open_read_only()?;
            let part = ctx::partition(&store, p.table.as_str(), p.partition, false)?;
            let tags = part.tags()?;
            if ctx.json {
                let docs: Vec<Json> = tags.iter().map(|t| tag_json(&p, t)).collect();
                return output::print_json(&json!({"tags": docs}));
            }
            let rows: Vec<Vec<String>> = tags
                .iter()
                .map(|t| {
                    vec![
                        t.name.to_string(),
                        format!("{} (term {})", t.branch, t.term),
                        format!("v{}", t.version),
                        output::time(t.created_at_ms),
                    ]
                })
                .collect();
            print!(
                "{}",
                output::table(&["TAG", "BRANCH", "VERSION", "CREATED"], &rows)
            );
            Ok(())
        }
        TagCmd::Get {
            name,
            target,
            key,
            hex,
        } => {
            target::branch_name(&name, "NAME")?;
            let p = target::plain_partition(&target, "tag get")?;
            let k = if hex {
                output::unhex(&key).map_err(|e| CliError::usage(format!("KEY: {e}")))?
            } else {
                key.clone().into_bytes()
            };
            let store = ctx.open_read_only()?;
            let part = ctx::partition(&store, p.table.as_str(), p.partition, false)?;
            let view = part.tag(&name)?;
            let Some(v) = view.get(&k)? else {
                return Err(CliError::not_found(format!(
                    "key \"{}\" not found in tag {name} of {p}",
                    output::show(&k, hex)
                )));
            };
            if ctx.json {
                let mut m = Map::new();
                output::put_bytes(&mut m, "key", &k, hex);
                output::put_bytes(&mut m, "value", &v.value, hex);
                m.insert("timestamp".into(), json!(v.timestamp));
                return output::print_json(&Json::Object(m));
            }
            let mut out = std::io::stdout().lock();
            let shown = if hex {
                output::hex(&v.value)
            } else {
                String::from_utf8_lossy(&v.value).into_owned()
            };
            writeln!(out, "{shown}").map_err(|e| CliError::io(format!("stdout: {e}")))
        }
    }
}
