//! What every renderer gets: the symbolized locations, the new side and,
//! for a comparison, the base side, each with its dumps and its profile as
//! the view shows it.

use crate::input::Input;
use crate::model::{Metric, Profile};
use crate::symbols::LocationTable;
use heapsample_format::Dump;

/// One side of a view.
#[derive(Clone, Debug)]
pub struct Side {
    /// How titles and reports name it (a path, an id, "3 dumps merged").
    pub name: String,
    /// Its dumps, at least one (several when merged).
    pub inputs: Vec<Input>,
    /// Their corrected profile, transformed as the view shows it.
    pub profile: Profile,
}

impl Side {
    /// The first (often the only) dump of the side.
    pub fn first_dump(&self) -> &Dump {
        &self.inputs[0].dump
    }
}

/// A view of one or two sides, as every renderer draws it.
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub table: &'a LocationTable,
    pub new: &'a Side,
    pub base: Option<&'a Side>,
    pub metric: Metric,
}
