//! Folded (collapsed) stacks: `root;…;leaf VALUE`, one stack per line,
//! integer values, the format inferno, flamegraph.pl and speedscope read.
//!
//! For a comparison the default is two columns, `stack BASE NEW`: what
//! `inferno-diff-folded` and `difffolded.pl` write and what
//! `inferno-flamegraph` and `flamegraph.pl` draw as a differential flame
//! graph (a one-column negative value is silently dropped by those tools).
//! `--delta` prints one signed column, new − base, as
//! `jeprof --collapsed --base` does.
//!
//! A frame in code a language runtime generated carries async-profiler's
//! suffix, which inferno's and flamegraph.pl's `java` palette colour:
//! `handleRequest (leak.js)_[j]` for JIT code of any language (Python,
//! JavaScript, Java), `_[i]` for the interpreter's; native frames have none.
//! The svg and the views keyed by stack (ages, lifetimes) show the names
//! without it.

use super::round;
use crate::model::folding::{diff, folded_with_kinds as folded};
use crate::pipeline::View;
use std::fmt::Write;

/// How a comparison is folded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DiffColumns {
    /// `stack BASE NEW`.
    #[default]
    BaseAndNew,
    /// `stack DELTA`, signed.
    Delta,
}

/// The folded text of the view.
pub fn render(view: &View<'_>, columns: DiffColumns) -> String {
    let new = folded(&view.new.profile, view.table, view.metric);
    let Some(base) = &view.base else {
        return single(&new);
    };
    let base = folded(&base.profile, view.table, view.metric);
    let changes = diff(&base, &new);
    let mut out = String::new();
    for (stack, change) in &changes {
        let (base, new) = (round(change.base), round(change.new));
        match columns {
            DiffColumns::Delta if new != base => {
                let _ = writeln!(out, "{stack} {}", new - base);
            }
            DiffColumns::BaseAndNew if base != 0 || new != 0 => {
                let _ = writeln!(out, "{stack} {base} {new}");
            }
            _ => {}
        }
    }
    out
}

fn single(stacks: &std::collections::BTreeMap<String, f64>) -> String {
    let mut out = String::new();
    for (stack, &value) in stacks {
        let value = round(value);
        if value != 0 {
            let _ = writeln!(out, "{stack} {value}");
        }
    }
    out
}
