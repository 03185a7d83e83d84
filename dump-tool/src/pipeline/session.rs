//! A session: the steps from dump files to a [`View`], in order.
//!
//! 1. [`Loaded::read`]: each side's files are read and checked
//!    ([`crate::input`]);
//! 2. [`Session::open`]: notes and warnings about the inputs (format-2
//!    dumps, dumps of other programs), then every address is interned and
//!    symbolized once in one location table, each dump is built into a
//!    corrected profile, a side's profiles are merged, and the view's
//!    transforms are applied.
//!
//! What the steps have to say goes to the caller as [`Notice`]s (the
//! command line prints them on stderr); a comparison of two different
//! programs is refused unless allowed.

use super::settings::Settings;
use super::view::{Side, View};
use super::view_spec::ViewSpec;
use crate::error::{Error, Result};
use crate::input::{Input, check_comparable, legacy_note, load, merge_warnings};
use crate::model::merge::merged;
use crate::model::transform::apply;
use crate::model::{Metric, Profile, TimeInfo};
use crate::symbols::runtime;
use crate::symbols::{InternedStacks, LocationTable, NameStyle};
use std::path::PathBuf;

/// Something a step says that does not stop the session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// Worth knowing (`heapdiff: note: …`).
    Note(String),
    /// Possibly wrong results (`heapdiff: warning: …`).
    Warning(String),
}

impl std::fmt::Display for Notice {
    /// `note: …` or `warning: …`, as the command line prints it after
    /// `heapdiff: `.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Notice::Note(note) => write!(f, "note: {note}"),
            Notice::Warning(warning) => write!(f, "warning: {warning}"),
        }
    }
}

/// The dumps of one side, read and checked, not yet symbolized.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub name: String,
    /// At least one: the constructors see to it.
    pub(crate) inputs: Vec<Input>,
}

impl Loaded {
    /// Read `paths` (at least one) in order; the first failure is the error.
    pub fn read(name: String, paths: &[PathBuf]) -> Result<Loaded> {
        if paths.is_empty() {
            return Err(Error::new(format!("{name}: no dump given")));
        }
        let inputs = paths.iter().map(|path| load(path)).collect::<Result<_>>()?;
        Ok(Loaded { name, inputs })
    }

    /// One dump already read.
    pub fn one(name: String, input: Input) -> Loaded {
        Loaded {
            name,
            inputs: vec![input],
        }
    }

    /// Dumps already read, summed as one side; `None` without any.
    pub fn several(name: String, inputs: Vec<Input>) -> Option<Loaded> {
        (!inputs.is_empty()).then_some(Loaded { name, inputs })
    }
}

/// The symbolized, corrected and transformed sides of a view.
pub struct Session {
    table: LocationTable,
    new: Side,
    base: Option<Side>,
    metric: Metric,
    names: NameStyle,
    spec: ViewSpec,
}

impl Session {
    /// Check `new` (and `base`), then symbolize, build and transform them
    /// into `table` (empty, or kept from earlier sessions so that known
    /// addresses are not symbolized again).
    pub fn open(
        mut table: LocationTable,
        mut new: Loaded,
        mut base: Option<Loaded>,
        settings: &Settings,
        notice: &mut dyn FnMut(Notice),
    ) -> Result<Session> {
        check(&new, base.as_ref(), settings, notice)?;
        let paths = new.inputs.iter().chain(base.iter().flat_map(|b| &b.inputs));
        let symbolize = settings
            .symbolize
            .with_dump_directories(paths.map(|input| input.path.as_path()));
        let new_stacks = intern(&mut table, &mut new.inputs);
        let base_stacks = base
            .as_mut()
            .map(|base| intern(&mut table, &mut base.inputs));
        release_free_memory();
        table.symbolize(&symbolize, &mut |w| notice(Notice::Warning(w)));
        release_free_memory();
        table.assign_display_names(settings.names);
        settings.not_mine.classify(&mut table);
        // Each side's interned stacks are dropped once it is built.
        let new = side(&mut table, new, new_stacks, settings);
        let base = base
            .zip(base_stacks)
            .map(|(base, stacks)| side(&mut table, base, stacks, settings));
        let spec = ViewSpec::of(
            settings,
            &new.profile,
            new.first_dump(),
            base.as_ref().map(|b| &b.profile),
        );
        Ok(Session {
            table,
            new,
            base,
            metric: settings.metric,
            names: settings.names,
            spec,
        })
    }

    /// The view every renderer draws.
    pub fn view(&self) -> View<'_> {
        View {
            table: &self.table,
            new: &self.new,
            base: self.base.as_ref(),
            metric: self.metric,
            names: self.names,
            spec: &self.spec,
        }
    }

    /// The location table, to keep for the next session.
    pub fn into_table(self) -> LocationTable {
        self.table
    }
}

/// The inputs' notes and warnings; the error when comparing different
/// programs without leave.
pub(super) fn check(
    new: &Loaded,
    base: Option<&Loaded>,
    settings: &Settings,
    notice: &mut dyn FnMut(Notice),
) -> Result<()> {
    let all: Vec<&Input> = new
        .inputs
        .iter()
        .chain(base.into_iter().flat_map(|b| &b.inputs))
        .collect();
    if let Some(note) = legacy_note(&all) {
        notice(Notice::Note(note));
    }
    for input in &all {
        time_requirements(input, settings)?;
    }
    // One line per run, not per dump: the first dump of a runtime without names.
    if let Some(how) = all
        .iter()
        .find_map(|input| runtime::how_to_name(&input.dump))
    {
        notice(Notice::Note(how));
    }
    for side in std::iter::once(new).chain(base) {
        let dumps: Vec<_> = side.inputs.iter().map(|i| &i.dump).collect();
        merge_warnings(&dumps)
            .into_iter()
            .for_each(|w| notice(Notice::Warning(w)));
    }
    let Some(base) = base else { return Ok(()) };
    let (base_input, new_input) = (&base.inputs[0], &new.inputs[0]);
    let compatibility =
        check_comparable(&base_input.dump, &new_input.dump, settings.allow_mismatch);
    compatibility
        .warnings
        .into_iter()
        .for_each(|w| notice(Notice::Warning(w)));
    match compatibility.error {
        Some(error) => Err(Error::file(&new_input.path, error)),
        None => Ok(()),
    }
}

/// A birth range needs births and a temporary metric lifetimes: a dump
/// without them is an error naming what it lacks.
pub(super) fn time_requirements(input: &Input, settings: &Settings) -> Result<()> {
    let time = TimeInfo::of(&input.dump, settings.build.temporary_ns);
    let births = !settings.build.born.is_all();
    let lifetimes = Metric::TEMPORARY.contains(&settings.metric);
    if (births && !time.births) || (lifetimes && !time.lifetimes) {
        let what = if births && !time.births {
            "--born-after/--born-before"
        } else {
            settings.metric.name()
        };
        return Err(Error::file(&input.path, lacks_time(input, &time, what)));
    }
    Ok(())
}

/// One line: the dump's version and the time views it lacks, for `what`.
pub(super) fn lacks_time(input: &Input, time: &TimeInfo, what: &str) -> String {
    let missing = time.missing().unwrap_or("nothing");
    if input.version < heapsample_format::TIMED_VERSION {
        format!(
            "{what} is not available: dump format {} carries no {missing}",
            input.version
        )
    } else {
        format!("{what} is not available: this dump was written without {missing}")
    }
}

/// Give the memory freed so far back to the system. The steps of a
/// session free large amounts in small pieces (the dumps' frames once
/// interned, the symbol files' tables once every address is resolved) that
/// the allocator would keep: what the next step allocates would then come
/// on top of them instead of in their place, and a large dump's view would
/// peak at the sum of its steps (glibc's `malloc_trim`; other C libraries
/// return such memory themselves or not at all).
pub(super) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory the allocator holds free.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Every dump's stacks as interned locations; the dumps' own frames are
/// released (a side's dumps keep everything but their stacks' frames,
/// which are in the table).
pub(super) fn intern(table: &mut LocationTable, inputs: &mut [Input]) -> Vec<InternedStacks> {
    inputs
        .iter_mut()
        .map(|input| table.intern_and_release_frames(&mut input.dump))
        .collect()
}

/// The side as the view shows it: each dump corrected on its own, merged
/// when several, then transformed.
pub(super) fn side(
    table: &mut LocationTable,
    loaded: Loaded,
    stacks: Vec<InternedStacks>,
    settings: &Settings,
) -> Side {
    let profiles: Vec<Profile> = loaded
        .inputs
        .iter()
        .zip(&stacks)
        .map(|(input, stacks)| Profile::build(&input.dump, stacks, table, settings.build))
        .collect();
    drop(stacks);
    let profile = match <[Profile; 1]>::try_from(profiles) {
        Ok([one]) => one,
        Err(several) => merged(several),
    };
    let profile = if settings.transforms.is_identity() {
        profile
    } else {
        apply(&profile, table, &settings.transforms, settings.metric)
    };
    Side {
        name: loaded.name,
        inputs: loaded.inputs,
        profile,
    }
}
