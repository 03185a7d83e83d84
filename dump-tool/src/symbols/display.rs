//! The names frames show: short or full, qualified by their module where
//! two modules define the same name.
//!
//! Owns [`NameStyle`] and [`LocationTable::assign_display_names`].

use super::location::{Line, ModuleId};
use super::table::LocationTable;
use std::collections::HashMap;

/// Which name of a function the text formats show.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NameStyle {
    /// No parameter lists, template arguments collapsed.
    #[default]
    Short,
    /// The whole demangled signature.
    Full,
}

impl LocationTable {
    /// Set the name every line shows in folded stacks, flamegraphs and the
    /// text report: the short or the full name, followed by ` [module]`
    /// when functions of two modules would otherwise share it (so they are
    /// never merged).
    pub fn assign_display_names(&mut self, style: NameStyle) {
        let base = |line: &Line| match style {
            NameStyle::Short => line.short.clone(),
            NameStyle::Full => line.function.clone(),
        };
        let mut modules_of: HashMap<String, Vec<Option<ModuleId>>> = HashMap::new();
        for location in self.locations.iter().filter(|l| l.resolved) {
            for line in &location.lines {
                let modules = modules_of.entry(base(line)).or_default();
                if !modules.contains(&location.module) {
                    modules.push(location.module);
                }
            }
        }
        let module_names: Vec<String> = self
            .modules
            .iter()
            .map(|m| m.short_name().to_string())
            .collect();
        for location in &mut self.locations {
            let qualifier = location
                .module
                .map(|m| module_names[m].as_str())
                .unwrap_or("?");
            for line in &mut location.lines {
                let name = base(line);
                let shared = location.resolved
                    && modules_of
                        .get(&name)
                        .is_some_and(|modules| modules.len() > 1);
                line.qualifier = shared.then(|| qualifier.to_string());
                line.display = if shared {
                    format!("{name} [{qualifier}]")
                } else {
                    name
                };
            }
        }
    }
}
