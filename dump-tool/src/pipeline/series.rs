//! A series: several dumps of one process, each built into its own
//! profile in one location table, for the reports over time (which
//! functions grow, `crate::compare::growth`).
//!
//! The same steps as a [`super::Session`]'s, for many dumps instead of a
//! base and a new side: notes about the inputs, every address interned and
//! symbolized once, each dump corrected and transformed as the settings
//! say.

use super::session::{Loaded, Notice, intern, release_free_memory, side};
use super::settings::Settings;
use super::view::Side;
use crate::input::{Input, legacy_note};
use crate::symbols::LocationTable;

/// The dumps of a series, symbolized, corrected and transformed.
pub struct Series {
    table: LocationTable,
    sides: Vec<Side>,
}

impl Series {
    /// Build every input (oldest first) into `table` (empty, or kept from
    /// earlier sessions).
    pub fn open(
        mut table: LocationTable,
        mut inputs: Vec<Input>,
        settings: &Settings,
        notice: &mut dyn FnMut(Notice),
    ) -> Series {
        if let Some(note) = legacy_note(&inputs.iter().collect::<Vec<_>>()) {
            notice(Notice::Note(note));
        }
        let symbolize = settings
            .symbolize
            .with_dump_directories(inputs.iter().map(|input| input.path.as_path()));
        let stacks = intern(&mut table, &mut inputs);
        release_free_memory();
        table.symbolize(&symbolize, &mut |w| notice(Notice::Warning(w)));
        release_free_memory();
        table.assign_display_names(settings.names);
        settings.not_mine.classify(&mut table);
        let sides = inputs
            .into_iter()
            .zip(stacks)
            .map(|(input, stacks)| {
                let name = input.path.display().to_string();
                side(&mut table, Loaded::one(name, input), vec![stacks], settings)
            })
            .collect();
        Series { table, sides }
    }

    /// The symbolized locations.
    pub fn table(&self) -> &LocationTable {
        &self.table
    }

    /// One side per dump, in the order given.
    pub fn sides(&self) -> &[Side] {
        &self.sides
    }

    /// The location table, to keep for the next session.
    pub fn into_table(self) -> LocationTable {
        self.table
    }
}
