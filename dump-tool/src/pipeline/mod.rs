//! The one pipeline every output goes through: dumps are loaded, checked,
//! symbolized, built into corrected profiles (several dumps of a side
//! merged), transformed into the view the user asked for, and handed to
//! the renderers as one [`View`].
//!
//! Owns [`Session`] (the steps, in order, and what they report on the
//! way), [`Series`] (the same steps for many dumps of one process),
//! [`Settings`] (everything that shapes a view), [`View`] and the
//! [`ViewSpec`] every output states. The
//! command line, `heapdiff merge` and `heapdiff serve` all build their
//! outputs through a [`Session`], so every view option works in every
//! format. [`time`]: the time views (lifetimes, ages, leaks, peak) over a
//! view or a [`Series`] of dumps. Reads dump and symbol files; never
//! writes.

pub mod series;
pub mod session;
pub mod settings;
pub mod time;
pub mod view;
pub mod view_spec;

pub use series::Series;
pub use session::{Loaded, Notice, Session};
pub use settings::Settings;
pub use view::{Side, View};
pub use view_spec::ViewSpec;
