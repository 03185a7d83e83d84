//! Symbols: raw return addresses → locations with their (inlined)
//! functions, files and lines, and the names people read.
//!
//! Owns the [`LocationTable`] ([`table`]): addresses interned once per
//! module identity and file address (a dump's stacks as
//! [`InternedStacks`]), symbolized module by module
//! ([`debug_files`] finds and checks the file holding a module's symbols,
//! [`resolve`] reads its DWARF and symbol table), and the names frames show
//! ([`names`]: demangling and short names; [`display`]: short or full,
//! qualified where two modules share a name), and the names a dump carries
//! for runtime-generated code ([`runtime`]). Reads symbol files, never
//! dumps; knows nothing of profiles or output.

pub mod debug_files;
pub mod display;
pub mod interned;
pub mod location;
pub mod module;
pub mod names;
pub mod options;
pub mod progress;
pub mod resolve;
pub mod runtime;
pub mod table;

pub use display::NameStyle;
pub use interned::{InternedStacks, StackLocations};
pub use location::{Line, Location, LocationId, ModuleId};
pub use module::{ModuleRecord, hex};
pub use options::SymbolizeOptions;
pub use progress::{Progress, ProgressCallback};
pub use table::{LocationTable, SymbolizeStats};
