//! What every renderer gets: the symbolized locations, the new side and,
//! for a comparison, the base side, each with its dumps and its profile as
//! the view shows it.

use super::view_spec::ViewSpec;
use crate::input::Input;
use crate::model::{Metric, Profile};
use crate::symbols::{LocationTable, NameStyle};
use heapsample_format::Dump;

/// One side of a view.
#[derive(Clone, Debug)]
pub struct Side {
    /// How titles and reports name it (a path, an id, "3 dumps merged").
    pub name: String,
    /// Its dumps: at least one (several when merged), as every side is
    /// made by a `Session` from a `Loaded`. Their stacks' frames are empty:
    /// the session moved them into its location table (the profile's
    /// samples hold the frames).
    pub(crate) inputs: Vec<Input>,
    /// Their corrected profile, transformed as the view shows it.
    pub profile: Profile,
}

impl Side {
    /// Its dumps, at least one.
    pub fn inputs(&self) -> &[Input] {
        &self.inputs
    }

    /// The first (often the only) dump of the side.
    pub fn first_input(&self) -> &Input {
        &self.inputs[0]
    }

    /// The first dump's contents.
    pub fn first_dump(&self) -> &Dump {
        &self.first_input().dump
    }
}

/// A view of one or two sides, as every renderer draws it.
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub table: &'a LocationTable,
    pub new: &'a Side,
    pub base: Option<&'a Side>,
    pub metric: Metric,
    /// The names the frames show (`LocationTable::assign_display_names`).
    pub names: NameStyle,
    /// What shaped it, as every output states it.
    pub spec: &'a ViewSpec,
}
