//! Raw dump counts summed per innermost program function, and their
//! rendering for failure messages.

use crate::symbols::Symbols;
use heapsample_format::{Dump, Stack};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Counts summed over several stacks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Number of stacks summed.
    pub stacks: u64,
    /// Sum of `live_objects`.
    pub live_objects: u64,
    /// Sum of `live_bytes`.
    pub live_bytes: u64,
    /// Sum of `live_usable_bytes`.
    pub live_usable_bytes: u64,
    /// Sum of `alloc_objects`.
    pub alloc_objects: u64,
    /// Sum of `alloc_bytes`.
    pub alloc_bytes: u64,
}

impl Counts {
    /// Add one stack's counts.
    pub fn add(&mut self, s: &Stack) {
        self.stacks += 1;
        self.live_objects += s.live_objects;
        self.live_bytes += s.live_bytes;
        self.live_usable_bytes += s.live_usable_bytes;
        self.alloc_objects += s.alloc_objects;
        self.alloc_bytes += s.alloc_bytes;
    }
}

/// Raw counts of `dump` summed per innermost program function (see
/// [`Symbols::innermost_function`]); stacks with no frame in the program are
/// summed under `"<outside>"`.
pub fn per_function(dump: &Dump, symbols: &Symbols) -> BTreeMap<String, Counts> {
    let mut map: BTreeMap<String, Counts> = BTreeMap::new();
    for s in &dump.stacks {
        let key = symbols
            .innermost_function(dump, s)
            .unwrap_or("<outside>")
            .to_string();
        map.entry(key).or_default().add(s);
    }
    map
}

/// The stacks of `dump` whose innermost program function is `function`.
pub fn stacks_in<'a>(dump: &'a Dump, symbols: &Symbols, function: &str) -> Vec<&'a Stack> {
    dump.stacks
        .iter()
        .filter(|s| symbols.innermost_function(dump, s) == Some(function))
        .collect()
}

/// A readable rendering of the per-function table, for failure messages.
pub fn render_per_function(table: &BTreeMap<String, Counts>) -> String {
    let mut s = String::from(
        "function: stacks live_objects live_bytes live_usable alloc_objects alloc_bytes\n",
    );
    for (k, c) in table {
        let _ = writeln!(
            s,
            "  {k}: {} {} {} {} {} {}",
            c.stacks,
            c.live_objects,
            c.live_bytes,
            c.live_usable_bytes,
            c.alloc_objects,
            c.alloc_bytes
        );
    }
    s
}
