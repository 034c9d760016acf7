//! One crafted page's trial: read, diff, check, compact and collect the damaged store (each
//! right or `Corruption`, bounded and with panics caught), then put the page back and
//! require every branch to read exactly right.

use super::*;

/// How one check turned out.
pub(crate) enum Seen {
    Right,
    Corrupt,
    Bad(String),
}

pub(crate) fn verdict<T>(
    r: bough::Result<T>,
    what: &str,
    right: impl FnOnce(T) -> Result<(), String>,
) -> Seen {
    match r {
        Ok(v) => match right(v) {
            Ok(()) => Seen::Right,
            Err(why) => Seen::Bad(format!("wrong data from {what}: {why}")),
        },
        Err(e) if e.kind() == ErrorKind::Corruption => Seen::Corrupt,
        Err(e) => Seen::Bad(format!(
            "{what} failed with {:?}, not Corruption: {e}",
            e.kind()
        )),
    }
}

/// Reads a branch by a full scan and point lookups (all keys, or a sample of them).
pub(crate) fn read_all(
    part: &bough::PartitionHandle,
    name: &str,
    want: &State,
    every_get: bool,
) -> Seen {
    let branch = match part.branch(name) {
        Ok(b) => b,
        Err(e) if e.kind() == ErrorKind::Corruption => return Seen::Corrupt,
        Err(e) => return Seen::Bad(format!("opening {name} failed with {:?}: {e}", e.kind())),
    };
    match verdict(read_branch(&branch), "a scan", |s| {
        if s == *want {
            Ok(())
        } else {
            Err(state_diff(want, &s))
        }
    }) {
        Seen::Right => {}
        other => return other,
    }
    let step = if every_get {
        1
    } else {
        (want.len() / 256).max(1)
    };
    for (k, v) in want.iter().step_by(step) {
        match verdict(branch.get_blocking(k), "a get", |got| match got {
            Some(g) if *g.value == **v => Ok(()),
            got => Err(format!(
                "get({}) returned {} bytes",
                String::from_utf8_lossy(k),
                got.map_or(0, |g| g.value.len())
            )),
        }) {
            Seen::Right => {}
            other => return other,
        }
    }
    Seen::Right
}

/// One crafted page and its checks.
pub(crate) fn one_craft(seed: u64, n: u64, i: u64, s: &Subject) -> Tally {
    let mut tally = Tally::default();
    let mut r = Rng::derive(seed, &[0x4352, n, i]);
    // A page and a craft that applies to it. Trials take the page kinds in turn (mapping,
    // index, leaf; those the store has): a store holds few index pages among hundreds of
    // leaves and mapping pages, and a uniform pick would leave them uncrafted on most
    // seeds. When no craft applies to any page of the trial's kind, any page will do.
    let kinds: Vec<Vec<&Candidate>> = [kind::MAPPING, kind::INDEX, kind::LEAF]
        .iter()
        .map(|&k| {
            s.candidates
                .iter()
                .filter(|c| c.kind == k)
                .collect::<Vec<_>>()
        })
        .filter(|g| !g.is_empty())
        .collect();
    let all: Vec<&Candidate> = s.candidates.iter().collect();
    let group = kinds
        .get((i % kinds.len().max(1) as u64) as usize)
        .unwrap_or(&all);
    let mut chosen = None;
    for attempt in 0..64 {
        let pool = if attempt < 32 { group } else { &all };
        let Some(&c) = r.pick(pool) else {
            break;
        };
        let crafts: &[Craft] = match c.kind {
            kind::MAPPING => &MAPPING_CRAFTS,
            kind::INDEX => &INDEX_CRAFTS,
            _ => &LEAF_CRAFTS,
        };
        let Some(&craft) = r.pick(crafts) else {
            continue;
        };
        if let Some(p) = craft_payload(c, craft, &mut r) {
            chosen = Some((c.clone(), craft, p));
            break;
        }
    }
    let Some((c, craft, payload)) = chosen else {
        return tally;
    };
    let ctx = format!(
        "seed {seed} craft {n}.{i}: {craft:?} in page {} of {}",
        c.index, c.path
    );
    let image = s.image.clone_durable();
    let original = match read_page(&image, &c.path, c.index)
        .and_then(|o| write_page(&image, &c.path, c.index, c.kind, c.salt, &payload).map(|()| o))
    {
        Ok(o) => o,
        Err(e) => {
            tally.fail(format!("{ctx}: cannot craft: {e}"));
            return tally;
        }
    };
    tally.crafted_pages += 1;
    match c.kind {
        kind::MAPPING => tally.crafted_mapping += 1,
        kind::INDEX => tally.crafted_index += 1,
        _ => tally.crafted_leaf += 1,
    }
    let clock = ManualClock::new(10_000_000);
    let corrupt = damaged_checks(&ctx, s, &image, &c, &clock, &mut tally);
    if corrupt {
        tally.crafted_detected += 1;
    } else {
        tally.crafted_unread += 1;
    }
    // Put the page back: everything must be there, exactly. (GC may have deleted the file
    // once compaction moved what a head needed out of it; the read-back below decides.)
    if image.file_len(&c.path).is_ok() {
        let restored = image
            .open(&c.path, OpenOptions::write_create())
            .and_then(|f| {
                f.write_at(u64::from(c.index) * u64::from(PAGE_SIZE), &original)?;
                f.sync()
            });
        if let Err(e) = restored {
            tally.fail(format!("{ctx}: cannot put the page back: {e}"));
            return tally;
        }
    } else if !s.collectable.contains(&c.path) {
        tally.crafted_file_collected += 1;
    }
    let store = match Store::open(memory_options(image.clone(), &clock)) {
        Ok(st) => st,
        Err(e) => {
            tally.fail(format!("{ctx}: reopen after restoring failed: {e}"));
            return tally;
        }
    };
    for ((f, name), want) in &s.branches {
        let Ok(part) = store.partition(TABLE, *f) else {
            continue;
        };
        match read_all(&part, name, want, s.every_get) {
            Seen::Right => {}
            Seen::Corrupt => {
                tally.lost += 1;
                tally.fail(format!(
                    "{ctx}: with the page put back (after a GC), family {f} branch {name} is damaged: data was deleted"
                ));
            }
            Seen::Bad(why) => tally.fail(format!(
                "{ctx}: with the page put back, family {f} branch {name}: {why}"
            )),
        }
    }
    let _ = store.close();
    tally
}

/// The checks on the store holding the crafted page; returns whether anything reported
/// `Corruption`.
pub(crate) fn damaged_checks(
    ctx: &str,
    s: &Subject,
    image: &MemoryStorage,
    c: &Candidate,
    clock: &ManualClock,
    tally: &mut Tally,
) -> bool {
    let store = match Store::open(memory_options(image.clone(), clock)) {
        Ok(st) => st,
        Err(e) if e.kind() == ErrorKind::Corruption => return true,
        Err(e) => {
            tally.fail(format!("{ctx}: open failed: {e}"));
            return false;
        }
    };
    let mut corrupt = false;
    let mut note = |seen: Seen, tally: &mut Tally, what: &str| match seen {
        Seen::Right => {}
        Seen::Corrupt => corrupt = true,
        Seen::Bad(why) => {
            if why.starts_with("wrong") {
                tally.wrong += 1;
            }
            tally.fail(format!("{ctx}: {what}: {why}"));
        }
    };
    let families: BTreeSet<u32> = s.branches.keys().map(|(f, _)| *f).collect();
    for &f in &families {
        let part = match store.partition(TABLE, f) {
            Ok(p) => p,
            Err(e) => {
                tally.fail(format!("{ctx}: partition handle: {e}"));
                continue;
            }
        };
        let branches: Vec<(&String, &State)> = s
            .branches
            .iter()
            .filter(|((fam, _), _)| *fam == f)
            .map(|((_, b), st)| (b, st))
            .collect();
        for &(name, want) in &branches {
            let seen = read_all(&part, name, want, s.every_get);
            note(seen, tally, &format!("family {f} branch {name}"));
        }
        // Diffs against main: exactly the model's keys, or Corruption.
        let main = s.branches.get(&(f, "main".to_string()));
        for &(name, want) in branches.iter().filter(|(b, _)| b.as_str() != "main") {
            let Some(main) = main else { break };
            let keys: BTreeSet<&Vec<u8>> = main
                .keys()
                .chain(want.keys())
                .filter(|k| main.get(*k) != want.get(*k))
                .collect();
            let seen = verdict(part.diff("main", name), "a diff", |d| {
                let got: BTreeSet<&Vec<u8>> = d.iter().map(|e| &e.key).collect();
                if got == keys {
                    Ok(())
                } else {
                    Err(format!(
                        "{} keys differ, the diff found {}",
                        keys.len(),
                        got.len()
                    ))
                }
            });
            note(seen, tally, &format!("family {f} diff main..{name}"));
        }
        // Compaction walks every mapping page of the head it compacts; a crafted tree page
        // it would copy as it is, so only mapping crafts run it.
        if c.kind == kind::MAPPING {
            for &(name, _) in &branches {
                let Ok(b) = part.branch(name) else { continue };
                let seen = verdict(b.compact_now(), "compaction", |_| Ok(()));
                note(seen, tally, &format!("family {f} branch {name}"));
            }
        }
    }
    tally.integrity_checks += 1;
    match crate::check::check_storage(Arc::new(image.clone())) {
        Ok(rep) if !rep.is_ok() => corrupt = true,
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::Corruption => corrupt = true,
        Err(e) => tally.fail(format!("{ctx}: the checker failed with {e}")),
    }
    for &f in &families {
        if let Ok(p) = store.partition(TABLE, f) {
            match p.gc() {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Corruption => corrupt = true,
                Err(e) => tally.fail(format!(
                    "{ctx}: GC of family {f} failed with {:?}, not Corruption: {e}",
                    e.kind()
                )),
            }
        }
    }
    let _ = store.close();
    corrupt
}
