//! Everything that shapes a view, gathered from the command line or the
//! server's options.

use crate::model::{BuildOptions, Metric, NotMine, Transforms};
use crate::symbols::{NameStyle, SymbolizeOptions};

/// How to symbolize, build and transform the dumps of a session.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// Where symbol files are looked for.
    pub symbolize: SymbolizeOptions,
    /// Short or full function names.
    pub names: NameStyle,
    /// Whether the allocator's own frames stay at the leaf.
    pub build: BuildOptions,
    /// Focus, ignore, hide, extra allocator frames, threads, size classes.
    pub transforms: Transforms,
    /// The metric the view measures (the size classes use its side).
    pub metric: Metric,
    /// Compare dumps of different programs instead of refusing to.
    pub allow_mismatch: bool,
    /// What is not the program's own code (`--not-mine`, `--all-mine`):
    /// the rule naming each ranked function's program frame.
    pub not_mine: NotMine,
}
