//! The one pipeline every output goes through: dumps are loaded, checked,
//! symbolized, built into corrected profiles (several dumps of a side
//! merged), transformed into the view the user asked for, and handed to
//! the renderers as one [`View`].
//!
//! Owns [`Session`] (the steps, in order, and what they report on the
//! way), [`Series`] (the same steps for many dumps of one process),
//! [`Settings`] (everything that shapes a view) and [`View`]. The
//! command line, `heapdiff merge` and `heapdiff serve` all build their
//! outputs through a [`Session`], so every view option works in every
//! format. Reads dump and symbol files; never writes.

pub mod series;
pub mod session;
pub mod settings;
pub mod view;

pub use series::Series;
pub use session::{Loaded, Notice, Session};
pub use settings::Settings;
pub use view::{Side, View};
