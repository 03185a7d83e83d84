//! The test programs' own reports of their truth (`site <function>
//! key=value ...` lines and friends), and their comparison with a dump.

use crate::aggregate::{Counts, per_function, render_per_function};
use crate::run::Outcome;
use crate::symbols::Symbols;
use heapsample_format::Dump;
use std::collections::{BTreeMap, HashMap};

/// Assert that the dump's per-function live and allocated counts equal what
/// the program reported for each of its sites (`sites`), naming every
/// mismatch and showing the whole per-function table when one is found.
/// `context` (e.g. [`Outcome::context`]) is appended to the failure message.
pub fn assert_sites_match(dump: &Dump, symbols: &Symbols, sites: &[SiteReport], context: &str) {
    let table = per_function(dump, symbols);
    let check = SiteCheck {
        live: true,
        alloc: true,
        usable: false,
    };
    let problems = site_mismatches(sites, &table, check);
    assert!(
        problems.is_empty(),
        "per-site counts differ from the program's own:\n{problems:#?}\n{}\n{context}",
        render_per_function(&table)
    );
}

/// One `site <function> key=value ...` line printed by a test program: its
/// own exact numbers for one allocation site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteReport {
    /// The site's function name.
    pub name: String,
    /// The `key=value` fields; values that are not numbers (`unknown`) are
    /// absent.
    pub fields: HashMap<String, u64>,
}

impl SiteReport {
    /// A field that must be present.
    pub fn get(&self, key: &str) -> u64 {
        *self
            .fields
            .get(key)
            .unwrap_or_else(|| panic!("site {} reports no numeric {key}", self.name))
    }

    /// A field that may be absent (e.g. `live_usable=unknown`).
    pub fn opt(&self, key: &str) -> Option<u64> {
        self.fields.get(key).copied()
    }
}

/// Parse every `site ...` line of a program's stdout, in order.
pub fn parse_sites(stdout: &str) -> Vec<SiteReport> {
    stdout
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            if words.next() != Some("site") {
                return None;
            }
            let name = words.next()?.to_string();
            let fields = words
                .filter_map(|w| {
                    let (k, v) = w.split_once('=')?;
                    Some((k.to_string(), v.parse().ok()?))
                })
                .collect();
            Some(SiteReport { name, fields })
        })
        .collect()
}

/// [`parse_sites`] of a run's stdout, with `live_usable` filled in from the
/// `usable <function> <bytes>` lines alloc_sites.c prints on stderr (stderr
/// because glibc's usable sizes depend on the heap layout, which the shim
/// changes, so they cannot be part of the compared stdout).
pub fn sites_with_usable(outcome: &Outcome) -> Vec<SiteReport> {
    let mut usable: HashMap<String, u64> = HashMap::new();
    for line in outcome.stderr.lines() {
        let mut it = line.split_whitespace();
        if it.next() != Some("usable") {
            continue;
        }
        if let (Some(name), Some(Ok(n))) = (it.next(), it.next().map(str::parse::<u64>)) {
            usable.insert(name.to_string(), n);
        }
    }
    let mut sites = parse_sites(&outcome.stdout);
    for site in &mut sites {
        if let Some(n) = usable.get(&site.name) {
            site.fields.insert("live_usable".to_string(), *n);
        }
    }
    sites
}

/// Which numbers [`site_mismatches`] compares.
#[derive(Clone, Copy, Debug)]
pub struct SiteCheck {
    /// Compare `live_objects` and `live_bytes` (always exact at lg 0).
    pub live: bool,
    /// Compare `alloc_objects` and `alloc_bytes` for sites that report
    /// `exact_alloc=1` (with `prof_accum`, the default).
    pub alloc: bool,
    /// Compare `live_usable_bytes` with the program's `live_usable` where
    /// it knows it (only meaningful on the allocator the program ran on).
    pub usable: bool,
}

/// Compare the raw dump counts per function (`table`, from [`per_function`]
/// of a dump taken with `lg_prof_sample:0`, where every allocation is
/// sampled) with the program's own numbers. Returns one message per
/// mismatch; empty means all equal.
pub fn site_mismatches(
    sites: &[SiteReport],
    table: &BTreeMap<String, Counts>,
    check: SiteCheck,
) -> Vec<String> {
    let mut problems = Vec::new();
    for site in sites {
        let got = table.get(&site.name).copied().unwrap_or_default();
        let mut compare = |what: &str, expected: u64, actual: u64| {
            if expected != actual {
                problems.push(format!(
                    "{}: {what} is {actual} in the dump, the program says {expected}",
                    site.name
                ));
            }
        };
        if check.live {
            compare("live_objects", site.get("live_objects"), got.live_objects);
            compare("live_bytes", site.get("live_bytes"), got.live_bytes);
        }
        if check.alloc && site.opt("exact_alloc") == Some(1) {
            compare(
                "alloc_objects",
                site.get("alloc_objects"),
                got.alloc_objects,
            );
            compare("alloc_bytes", site.get("alloc_bytes"), got.alloc_bytes);
        }
        if check.usable
            && let Some(usable) = site.opt("live_usable")
        {
            compare("live_usable_bytes", usable, got.live_usable_bytes);
        }
    }
    problems
}

/// Parse lines `<word> <key>=<number>` / `<word> <key>=<value>` printed on a
/// program's stderr, e.g. fork.c's `pid fork-child=123`: all values of `key`
/// on lines starting with `word`.
pub fn tagged_values(text: &str, word: &str, key: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            (it.next() == Some(word)).then_some(())?;
            it.find_map(|w| {
                w.split_once('=')
                    .filter(|(k, _)| *k == key)
                    .map(|(_, v)| v.to_string())
            })
        })
        .collect()
}

/// The runtime addresses that alloc_sites.c prints on stderr as
/// `addr <function> 0x...`.
pub fn reported_addresses(stderr: &str) -> BTreeMap<String, u64> {
    stderr
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            (it.next() == Some("addr")).then_some(())?;
            let name = it.next()?.to_string();
            let addr = u64::from_str_radix(it.next()?.trim_start_matches("0x"), 16).ok()?;
            Some((name, addr))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sites() {
        let s = parse_sites("x\nsite f size=8 live_usable=unknown alloc_objects=3\n");
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].get("alloc_objects"), 3);
        assert_eq!(s[0].opt("live_usable"), None);
    }
}
