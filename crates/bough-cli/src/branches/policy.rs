//! `bough branch protect / unprotect / expire`, and how a branch's policy is shown.

use super::*;

/// `bough branch protect|unprotect NAME TABLE.PART`.
#[derive(Debug, Args)]
pub struct PolicyArgs {
    /// The branch.
    pub name: String,
    /// TABLE.PART.
    #[arg(value_name = "TABLE.PART")]
    pub target: String,
}

/// `bough branch expire NAME TABLE.PART (--in DURATION | --at MS | --never) [--force]`.
#[derive(Debug, Args)]
pub struct ExpireArgs {
    /// The branch.
    pub name: String,
    /// TABLE.PART.
    #[arg(value_name = "TABLE.PART")]
    pub target: String,
    /// Expire this long from now (`90s`, `30m`, `1h`, `7d`, or milliseconds).
    #[arg(long = "in", value_name = "DURATION", conflicts_with_all = ["at", "never"], required_unless_present_any = ["at", "never"])]
    pub within: Option<String>,
    /// Expire at this time (ms since the epoch).
    #[arg(long, value_name = "MS", conflicts_with = "never")]
    pub at: Option<u64>,
    /// Never expire (removes an expiry).
    #[arg(long)]
    pub never: bool,
    /// Give an expiry to a protected branch or one with tags (it is then deleted when it
    /// expires, protected or not; its tags stay).
    #[arg(long)]
    pub force: bool,
}

/// `90s`, `30m`, `1h`, `7d`, `250ms` or a plain number of milliseconds.
pub(crate) fn duration_ms(s: &str) -> CliResult<u64> {
    let bad = || {
        CliError::usage(format!("`{s}` is not a duration")).hint(
            "write a number with a unit: 250ms, 90s, 30m, 1h, 7d (a plain number is milliseconds)",
        )
    };
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let per = match unit {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    n.checked_mul(per).ok_or_else(bad)
}

/// `protected`, `expires <time>`, both, or `-`.
pub(crate) fn policy_text(p: &bough::BranchPolicy) -> String {
    let mut parts = Vec::new();
    if p.protected {
        parts.push("protected".to_string());
    }
    if let Some(at) = p.expires_at_ms {
        parts.push(format!("expires {}", output::time(at)));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

fn policy_json(label: &str, p: &bough::BranchPolicy) -> Json {
    json!({"branch": label, "protected": p.protected, "expires_at_ms": p.expires_at_ms})
}

/// `bough branch protect` (`on`) and `bough branch unprotect`.
pub fn protect(ctx: &Ctx, a: &PolicyArgs, on: bool) -> CliResult<()> {
    target::branch_name(&a.name, "NAME")?;
    let t = resolve(&a.target, None, &[("NAME", Some(&a.name))])?;
    let store = ctx.open(false)?;
    let part = ctx::partition(&store, &t.table, t.partition, false)?;
    ctx::branch(&part, &t.branch)?;
    let p = if on {
        part.protect(&t.branch)?
    } else {
        part.unprotect(&t.branch)?
    };
    store.close()?;
    let text = if on {
        format!(
            "{} is protected: delete, reset, restore and merges into it that are not \
             fast-forwards are refused until `bough branch unprotect {} {}`",
            t.label(),
            t.branch,
            t.dir()
        )
    } else {
        format!("{} is no longer protected", t.label())
    };
    done(ctx, &text, policy_json(&t.label(), &p))
}

/// `bough branch expire`.
pub fn expire(ctx: &Ctx, a: &ExpireArgs) -> CliResult<()> {
    target::branch_name(&a.name, "NAME")?;
    let t = resolve(&a.target, None, &[("NAME", Some(&a.name))])?;
    let within = a.within.as_deref().map(duration_ms).transpose()?;
    let store = ctx.open(false)?;
    let part = ctx::partition(&store, &t.table, t.partition, false)?;
    ctx::branch(&part, &t.branch)?;
    let p = match (within, a.at) {
        (Some(ms), _) => part.set_expiry_in(&t.branch, ms, a.force),
        (None, Some(at)) => part.set_expiry(&t.branch, Some(at), a.force),
        (None, None) => part.set_expiry(&t.branch, None, a.force),
    }
    .map_err(|e| {
        let refused = e.kind() == bough::ErrorKind::InvalidArgument && !a.force;
        let err = CliError::from(e);
        if refused && t.branch != "main" {
            err.hint("add --force to give it an expiry anyway")
        } else {
            err
        }
    })?;
    store.close()?;
    let text = match p.expires_at_ms {
        Some(at) => format!(
            "{} expires {} (it is then deleted; its children and tags stay)",
            t.label(),
            output::time(at)
        ),
        None => format!("{} never expires", t.label()),
    };
    done(ctx, &text, policy_json(&t.label(), &p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration_ms("250").unwrap(), 250);
        assert_eq!(duration_ms("250ms").unwrap(), 250);
        assert_eq!(duration_ms("90s").unwrap(), 90_000);
        assert_eq!(duration_ms("30m").unwrap(), 1_800_000);
        assert_eq!(duration_ms("1h").unwrap(), 3_600_000);
        assert_eq!(duration_ms("7d").unwrap(), 604_800_000);
        for bad in ["", "h", "1x", "-1h", "1.5h", "99999999999999999999d"] {
            assert!(duration_ms(bad).is_err(), "{bad}");
        }
    }
}
