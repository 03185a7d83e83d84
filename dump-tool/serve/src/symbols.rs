//! The symbol service `go tool pprof` asks (`/symbolz`, and
//! `/debug/pprof/symbol` for the profiles under `/debug/pprof/`) when a
//! profile it fetched has frames without names: heapdiff leaves an
//! address it could not symbolize without a name so pprof can try the
//! binary itself, and pprof then posts the addresses still unnamed here.
//! The answer gives each address the name heapdiff showed for it
//! (`python3.11+0x5a7185` where nothing better exists), so pprof always
//! finishes.
//!
//! The addresses are those of the profiles served last (a bounded number,
//! the least recently served forgotten first); an address two of them
//! share with different names gets the most recent one's.

use crate::AppState;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use heapdiff::pipeline::View;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Profiles whose names are remembered.
const PROFILES: usize = 16;
/// Addresses remembered per profile at most.
const ADDRESSES: usize = 500_000;
/// The longest request body read (pprof posts `0x…+0x…`).
pub const MAX_QUERY_BYTES: usize = 16 << 20;

/// A profile's cache key and its names by address.
type Remembered = (String, Arc<HashMap<u64, String>>);

/// Address → name of the profiles served last, by their cache keys.
#[derive(Default)]
pub struct SymbolMemory {
    profiles: Mutex<Vec<Remembered>>,
}

impl SymbolMemory {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Remembered>> {
        self.profiles.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remember the names of every location of `view`, at the address
    /// its pprof profile gives it, under `key`.
    pub fn remember(&self, key: &str, view: &View<'_>) {
        let mut names = HashMap::new();
        let sides = std::iter::once(view.new).chain(view.base);
        'samples: for side in sides {
            for sample in &side.profile.samples {
                for frame in &sample.frames {
                    if names.len() >= ADDRESSES {
                        break 'samples;
                    }
                    let Some(location) = view.table.locations.get(frame.location()) else {
                        continue;
                    };
                    // The function at the address itself is the outermost.
                    if let Some(line) = location.lines.last() {
                        names
                            .entry(location.address.saturating_sub(1))
                            .or_insert_with(|| line.function.clone());
                    }
                }
            }
        }
        let mut profiles = self.lock();
        profiles.retain(|(k, _)| k != key);
        profiles.push((key.to_string(), Arc::new(names)));
        if profiles.len() > PROFILES {
            profiles.remove(0);
        }
    }

    /// True if the names of the profile `key` are still remembered (now
    /// the most recent).
    pub fn touch(&self, key: &str) -> bool {
        let mut profiles = self.lock();
        let Some(at) = profiles.iter().position(|(k, _)| k == key) else {
            return false;
        };
        let entry = profiles.remove(at);
        profiles.push(entry);
        true
    }

    /// The remembered name of `address`, the most recent profile's first.
    pub fn name(&self, address: u64) -> Option<String> {
        let profiles = self.lock();
        profiles
            .iter()
            .rev()
            .find_map(|(_, names)| names.get(&address).cloned())
    }
}

/// `GET`: what pprof checks first (`num_symbols: 1` says names are
/// served).
pub async fn symbol_count() -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "num_symbols: 1\n",
    )
        .into_response()
}

/// `POST` of `0xADDR+0xADDR…`: a line `0xADDR name` per known address.
pub async fn symbol_names(State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    let Ok(text) = std::str::from_utf8(&body) else {
        return crate::responses::refuse(StatusCode::BAD_REQUEST, "addresses are text");
    };
    let mut out = String::new();
    for word in text.split(['+', '\n', ' ']).filter(|w| !w.is_empty()) {
        let digits = word.trim_start_matches("0x").trim_start_matches("0X");
        let Ok(address) = u64::from_str_radix(digits, 16) else {
            continue;
        };
        if let Some(name) = state.symbolz.name(address) {
            out.push_str(&format!("{address:#x} {name}\n"));
        }
    }
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], out).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_recent_profile_answers_and_old_ones_are_forgotten() {
        let memory = SymbolMemory::default();
        let put = |key: &str, pairs: &[(u64, &str)]| {
            let names = pairs.iter().map(|&(a, n)| (a, n.to_string())).collect();
            let mut profiles = memory.lock();
            profiles.push((key.to_string(), Arc::new(names)));
        };
        put("a", &[(0x10, "old"), (0x20, "only_a")]);
        put("b", &[(0x10, "new")]);
        assert_eq!(memory.name(0x10).as_deref(), Some("new"));
        assert_eq!(memory.name(0x20).as_deref(), Some("only_a"));
        assert!(memory.touch("a"));
        assert_eq!(
            memory.name(0x10).as_deref(),
            Some("old"),
            "a is now the most recent"
        );
        assert!(!memory.touch("c"));
        assert_eq!(memory.name(0x30), None);
    }
}
