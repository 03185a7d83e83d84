//! Function names as people read them: demangling and short names.
//!
//! Owns turning a symbol's linkage name into its full demangled name
//! ([`demangle`]) and a full C++ name into the short form flamegraphs and
//! the text report show ([`short_name`]). Plain functions over strings: no
//! I/O, no knowledge of dumps or profiles, so every renderer (and the web
//! viewer) can reuse them.
//!
//! ## Which demangler
//!
//! C++ names go through the C++ runtime's own `__cxa_demangle` (libstdc++,
//! which every C++ program on the machine already uses): it is libiberty's
//! `cp-demangle.c`, the code `c++filt` runs, so it follows GCC's mangling as
//! it evolves. `c++filt` additionally passes `DMGL_VERBOSE`, whose only
//! effect is to print the four standard abbreviations `Ss`, `Si`, `So`, `Sd`
//! in full (`std::basic_string<char, std::char_traits<char>,
//! std::allocator<char> >` for `std::string`); [`demangle`] does the same
//! expansion, so the result is identical to `c++filt` (a test checks every
//! mangled symbol of libstdc++'s dynamic symbol table). The `cpp_demangle`
//! crate was measured on the same symbols and differs on hundreds of them.
//! Rust names (legacy and v0) go through `rustc-demangle`, without the hash.

use std::ffi::{CStr, CString, c_char, c_int, c_void};

#[link(name = "stdc++")]
unsafe extern "C" {
    /// The Itanium C++ ABI demangler (`<cxxabi.h>`).
    fn __cxa_demangle(
        mangled: *const c_char,
        buffer: *mut c_char,
        length: *mut usize,
        status: *mut c_int,
    ) -> *mut c_char;
}

/// The source language of a name, as far as demangling cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    Cxx,
    Rust,
    /// C, assembly or unknown: the name is shown as it is.
    Other,
}

/// The full demangled name of a linkage name and its language: Rust (legacy
/// or v0, without the hash), C++ (as `c++filt` prints it), else the name as
/// it is.
pub fn demangle(raw: &str) -> (String, Language) {
    // A symbol version (`name@GLIBCXX_3.4`) stays as it is, after the name.
    if let Some((name, version)) = raw.split_once('@')
        && !name.is_empty()
    {
        let (demangled, language) = demangle(name);
        return (format!("{demangled}@{version}"), language);
    }
    if let Some(rust) = demangle_rust(raw) {
        return (rust, Language::Rust);
    }
    if raw.starts_with("_Z")
        && let Some(cxx) = demangle_cxx(raw)
    {
        return (cxx, Language::Cxx);
    }
    (raw.to_string(), Language::Other)
}

/// A Rust symbol: v0 (`_R…`) or legacy (`_ZN…17h<16 hex>E`).
fn demangle_rust(raw: &str) -> Option<String> {
    let demangled = rustc_demangle::try_demangle(raw).ok()?;
    let with_hash = demangled.to_string();
    let legacy_hash = with_hash
        .rsplit_once("::h")
        .is_some_and(|(_, hash)| hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()));
    (raw.starts_with("_R") || legacy_hash).then(|| format!("{demangled:#}"))
}

/// `c++filt`'s demangling of an Itanium-ABI name, `None` if it is not one.
pub fn demangle_cxx(raw: &str) -> Option<String> {
    let mangled = CString::new(raw).ok()?;
    let mut status: c_int = 0;
    // SAFETY: a NUL-terminated input, no caller buffer (the runtime mallocs
    // the result), and a valid status pointer, as <cxxabi.h> requires.
    let result = unsafe {
        __cxa_demangle(
            mangled.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut status,
        )
    };
    if result.is_null() {
        return None;
    }
    // SAFETY: on success the result is a NUL-terminated malloc'ed string.
    let text = unsafe { CStr::from_ptr(result) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: the runtime allocated it with malloc and hands it over.
    unsafe { libc_free(result.cast()) };
    (status == 0).then(|| expand_standard_abbreviations(&text))
}

unsafe extern "C" {
    #[link_name = "free"]
    fn libc_free(pointer: *mut c_void);
}

/// The standard substitutions that `c++filt` (`DMGL_VERBOSE`) prints in
/// full and `__cxa_demangle` abbreviates.
const STANDARD_ABBREVIATIONS: [(&str, &str); 4] = [
    (
        "std::string",
        "std::basic_string<char, std::char_traits<char>, std::allocator<char> >",
    ),
    (
        "std::istream",
        "std::basic_istream<char, std::char_traits<char> >",
    ),
    (
        "std::ostream",
        "std::basic_ostream<char, std::char_traits<char> >",
    ),
    (
        "std::iostream",
        "std::basic_iostream<char, std::char_traits<char> >",
    ),
];

/// Replace each abbreviation where it is a whole name (not the start of
/// `std::string_view` or the tail of `x::std::string`).
fn expand_standard_abbreviations(text: &str) -> String {
    if !text.contains("std::") {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'scan: while !rest.is_empty() {
        let preceded_by_name = out
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
        if !preceded_by_name {
            for (short, full) in STANDARD_ABBREVIATIONS {
                if let Some(after) = rest.strip_prefix(short)
                    && !after
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_')
                {
                    out.push_str(full);
                    // The demangler separates `> >`; the expansion ends in `>`.
                    if after.starts_with('>') {
                        out.push(' ');
                    }
                    rest = after;
                    continue 'scan;
                }
            }
        }
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            out.push(c);
        }
        rest = chars.as_str();
    }
    out
}

/// The short form of a full name: C++ names lose their return type,
/// parameter list, qualifiers and clone suffixes, and every template
/// argument list collapses to `<…>`
/// (`std::vector<int, std::allocator<int> >::push_back(int const&)` →
/// `std::vector<…>::push_back`), as pprof and heaptrack show them. Other
/// languages are returned as they are.
pub fn short_name(full: &str, language: Language) -> String {
    without_signature(full, language, true)
}

/// The short form with its template arguments kept
/// (`Pool<Blob>::take` where [`short_name`] says `Pool<…>::take`): what
/// tells two instantiations of one template apart without their whole
/// signatures.
pub fn short_name_with_templates(full: &str, language: Language) -> String {
    without_signature(full, language, false)
}

/// A C++ name without return type, parameters, qualifiers and clone
/// suffixes, template argument lists collapsed to `<…>` if
/// `collapse_templates`; other languages as they are.
fn without_signature(full: &str, language: Language, collapse_templates: bool) -> String {
    if language != Language::Cxx {
        return full.to_string();
    }
    let tokens = tokenize(strip_clone_suffixes(full));
    let tokens = without_parameters(&tokens);
    let tokens = without_return_type(tokens);
    let mut out = String::new();
    for token in tokens {
        match token {
            Token::Group('<', _) if collapse_templates => out.push_str("<…>"),
            Token::Group(_, text) | Token::Text(text) => out.push_str(text),
            Token::Space => out.push(' '),
        }
    }
    out.trim().to_string()
}

/// ` [clone .cold]`, ` [clone .constprop.0]`… at the end.
fn strip_clone_suffixes(mut name: &str) -> &str {
    while let Some(start) = name.rfind(" [clone ") {
        if !name.ends_with(']') {
            break;
        }
        name = &name[..start];
    }
    name
}

/// A top-level piece of a C++ name.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Token<'a> {
    /// A bracketed group (`<…>`, `(…)`, `[…]`, `{…}`) with its brackets;
    /// the char is the opening bracket.
    Group(char, &'a str),
    /// Names, `::`, operators and other characters.
    Text(&'a str),
    /// One space at the top level.
    Space,
}

/// Split a name into top-level tokens. `operator<`, `operator()` and the
/// other operator names are text, not groups.
fn tokenize(name: &str) -> Vec<Token<'_>> {
    let bytes = name.as_bytes();
    let mut tokens = Vec::new();
    let mut index = 0;
    while index < bytes.len() {
        let c = bytes[index];
        if c == b' ' {
            tokens.push(Token::Space);
            index += 1;
        } else if let Some(end) = operator_end(name, index) {
            tokens.push(Token::Text(&name[index..end]));
            index = end;
        } else if matches!(c, b'<' | b'(' | b'[' | b'{') {
            let end = group_end(name, index);
            tokens.push(Token::Group(c as char, &name[index..end]));
            index = end;
        } else {
            let end = name[index..]
                .find([' ', '<', '(', '[', '{'])
                .map_or(name.len(), |offset| index + offset);
            // Stop before a following `operator` so it is tokenized as one.
            let end = name[index..end]
                .find("operator")
                .filter(|&offset| offset > 0 && is_operator_keyword(name, index + offset))
                .map_or(end, |offset| index + offset);
            tokens.push(Token::Text(&name[index..end]));
            index = end;
        }
    }
    tokens
}

/// True if `operator` at `at` is the keyword (not part of a longer name).
fn is_operator_keyword(name: &str, at: usize) -> bool {
    if !name.is_char_boundary(at) || !name[at..].starts_with("operator") {
        return false;
    }
    let before_ok = at == 0
        || !name[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
    let after = &name[at + "operator".len()..];
    let after_ok = !after
        .chars()
        .next()
        .is_some_and(|c| c.is_alphanumeric() || c == '_');
    before_ok && after_ok
}

/// Symbolic operator names, longest first.
const OPERATORS: &[&str] = &[
    "->*", "<<=", ">>=", "<=>", "()", "[]", "->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||",
    "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<", ">", "+", "-", "*", "/", "%",
    "&", "|", "^", "~", "!", "=", ",",
];

/// If an operator name starts at `index`, the index after it: `operator<<`,
/// `operator new[]`, `operator""_x`; a conversion operator
/// (`operator bool`) ends at its name, its type's template arguments are
/// left to the tokenizer.
fn operator_end(name: &str, index: usize) -> Option<usize> {
    if !is_operator_keyword(name, index) {
        return None;
    }
    let after = index + "operator".len();
    let rest = &name[after..];
    if let Some(op) = OPERATORS.iter().find(|op| rest.starts_with(**op)) {
        return Some(after + op.len());
    }
    for word in [" new[]", " delete[]", " new", " delete"] {
        if rest.starts_with(word) {
            return Some(after + word.len());
        }
    }
    if let Some(suffix) = rest.strip_prefix("\"\"") {
        let tail = suffix
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(suffix.len());
        return Some(after + 2 + tail);
    }
    Some(after)
}

/// The index just after the bracket group opening at `start`; nested
/// groups of every kind count, operator names inside do not.
fn group_end(name: &str, start: usize) -> usize {
    let bytes = name.as_bytes();
    let mut depth = 0usize;
    let mut index = start;
    while index < bytes.len() {
        if let Some(end) = operator_end(name, index) {
            index = end;
            continue;
        }
        match bytes[index] {
            b'<' | b'(' | b'[' | b'{' => depth += 1,
            b'>' | b')' | b']' | b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return index + 1;
                }
            }
            _ => {}
        }
        index += 1;
    }
    bytes.len()
}

/// Drop the function's parameter list (the last top-level `(…)` that
/// follows a name) and everything after it (`const`, `&&`, `noexcept`).
fn without_parameters<'a>(tokens: &[Token<'a>]) -> Vec<Token<'a>> {
    let parameters = tokens.iter().enumerate().rev().find_map(|(index, token)| {
        let follows_name = index > 0 && !matches!(tokens[index - 1], Token::Space);
        matches!(token, Token::Group('(', _) if follows_name).then_some(index)
    });
    match parameters {
        Some(index) => tokens[..index].to_vec(),
        None => tokens.to_vec(),
    }
}

/// Drop a return type: everything up to the last top-level space, except a
/// space that follows an operator name (`operator bool`,
/// `operator<< <…>`); spaces inside `(anonymous namespace)` and other
/// groups are never top level.
fn without_return_type(tokens: Vec<Token<'_>>) -> Vec<Token<'_>> {
    let last_space = tokens.iter().enumerate().rposition(|(index, token)| {
        matches!(token, Token::Space) && !follows_operator(&tokens, index)
    });
    match last_space {
        Some(index) => tokens[index + 1..].to_vec(),
        None => tokens,
    }
}

fn follows_operator(tokens: &[Token<'_>], space: usize) -> bool {
    space > 0 && matches!(tokens[space - 1], Token::Text(text) if text.starts_with("operator"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn short(full: &str) -> String {
        short_name(full, Language::Cxx)
    }

    #[test]
    fn demangles_like_cxxfilt() {
        assert_eq!(
            demangle("_ZNSt6vectorIiSaIiEE9push_backERKi").0,
            "std::vector<int, std::allocator<int> >::push_back(int const&)"
        );
        assert_eq!(
            demangle("_ZNKSs4sizeEv").0,
            "std::basic_string<char, std::char_traits<char>, std::allocator<char> >::size() const"
        );
        assert_eq!(demangle("main"), ("main".to_string(), Language::Other));
        assert_eq!(demangle("_Znotmangled").1, Language::Other);
    }

    #[test]
    fn abbreviations_expand_only_as_whole_names() {
        assert_eq!(
            expand_standard_abbreviations("f(std::string_view, std::ostream&)"),
            "f(std::string_view, std::basic_ostream<char, std::char_traits<char> >&)"
        );
        assert_eq!(
            expand_standard_abbreviations("x::std::string"),
            "x::std::string"
        );
    }

    #[test]
    fn rust_names_lose_the_hash() {
        let (name, language) = demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE");
        assert_eq!(name, "core::ptr::drop_in_place");
        assert_eq!(language, Language::Rust);
        // A C++ name that happens to parse as legacy Rust stays C++.
        assert_eq!(demangle("_ZN3foo3barEv").1, Language::Cxx);
    }

    #[test]
    fn short_names() {
        for (full, expected) in [
            (
                "std::vector<int, std::allocator<int> >::push_back(int const&)",
                "std::vector<…>::push_back",
            ),
            (
                "std::unique_ptr<Blob, std::default_delete<Blob> > std::make_unique<Blob>()",
                "std::make_unique<…>",
            ),
            (
                "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::basic_string(unsigned long, char, std::allocator<char> const&)",
                "std::__cxx11::basic_string<…>::basic_string",
            ),
            (
                "(anonymous namespace)::grow(int)",
                "(anonymous namespace)::grow",
            ),
            ("Foo::operator<(Foo const&) const", "Foo::operator<"),
            (
                "std::basic_ostream<char, std::char_traits<char> >& std::operator<< <std::char_traits<char> >(std::basic_ostream<char, std::char_traits<char> >&, char const*)",
                "std::operator<< <…>",
            ),
            ("Foo::operator()(int) const", "Foo::operator()"),
            ("Foo::operator bool() const", "Foo::operator bool"),
            ("operator new(unsigned long)", "operator new"),
            ("operator delete[](void*)", "operator delete[]"),
            (
                "main::{lambda(int)#1}::operator()(int) const",
                "main::{lambda(int)#1}::operator()",
            ),
            ("compute(int) [clone .cold]", "compute"),
            ("plain_c_function", "plain_c_function"),
            ("Session::Session()", "Session::Session"),
            (
                "std::__shared_ptr<Session, (__gnu_cxx::_Lock_policy)2>::__shared_ptr<std::allocator<void>>(std::_Sp_alloc_shared_tag<std::allocator<void> >)",
                "std::__shared_ptr<…>::__shared_ptr<…>",
            ),
            ("Foo::operator->() const", "Foo::operator->"),
            ("Foo::operator>>=(int)", "Foo::operator>>="),
        ] {
            assert_eq!(short(full), expected, "{full}");
        }
        assert_eq!(
            short_name_with_templates(
                "std::unique_ptr<Blob, std::default_delete<Blob> > Pool<Blob>::take()",
                Language::Cxx
            ),
            "Pool<Blob>::take"
        );
        assert_eq!(
            short_name("<alloc::vec::Vec<u8>>::push", Language::Rust),
            "<alloc::vec::Vec<u8>>::push"
        );
    }
}
