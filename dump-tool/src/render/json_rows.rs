//! The layout of the JSON reports: indented, one element of a list per
//! line.
//!
//! Owns [`RowFormatter`], a `serde_json` formatter: objects and lists are
//! indented by two spaces a level, except that an object or list that is an
//! element of a list is written on one line (`{"stack": 3, "estimate":
//! 4111.0, ...}`, `[0, 4, 7]`). A report of tens of thousands of stacks
//! stays readable line by line, a third of its pretty-printed size. No I/O
//! beyond the writer it is given.

use serde::Serialize;
use serde_json::ser::Formatter;
use std::io::{self, Write};

/// Serialize `value` into `writer` in the reports' layout.
pub fn write_rows<W: Write, T: Serialize + ?Sized>(writer: W, value: &T) -> io::Result<()> {
    let mut serializer = serde_json::Serializer::with_formatter(writer, RowFormatter::default());
    value.serialize(&mut serializer).map_err(io::Error::other)
}

/// One open object or list.
#[derive(Clone, Copy)]
struct Level {
    list: bool,
    one_line: bool,
    has_value: bool,
}

/// Indented objects and lists, list elements on one line each.
#[derive(Default)]
pub struct RowFormatter {
    open: Vec<Level>,
}

impl RowFormatter {
    fn begin<W: ?Sized + Write>(&mut self, writer: &mut W, list: bool) -> io::Result<()> {
        let one_line = self.open.last().is_some_and(|l| l.list || l.one_line);
        self.open.push(Level {
            list,
            one_line,
            has_value: false,
        });
        writer.write_all(if list { b"[" } else { b"{" })
    }

    fn end<W: ?Sized + Write>(&mut self, writer: &mut W, list: bool) -> io::Result<()> {
        if let Some(level) = self.open.pop()
            && !level.one_line
            && level.has_value
        {
            self.newline(writer)?;
        }
        writer.write_all(if list { b"]" } else { b"}" })
    }

    /// Before an element or a key: a separator, and on an indented level a
    /// new line.
    fn element<W: ?Sized + Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        let Some(level) = self.open.last_mut() else {
            return Ok(());
        };
        level.has_value = true;
        let one_line = level.one_line;
        if !first {
            writer.write_all(if one_line { b", " } else { b"," })?;
        }
        if one_line {
            Ok(())
        } else {
            self.newline(writer)
        }
    }

    fn newline<W: ?Sized + Write>(&self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b"\n")?;
        for _ in 0..self.open.len() {
            writer.write_all(b"  ")?;
        }
        Ok(())
    }
}

impl Formatter for RowFormatter {
    fn begin_array<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.begin(writer, true)
    }

    fn end_array<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.end(writer, true)
    }

    fn begin_array_value<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.element(writer, first)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.begin(writer, false)
    }

    fn end_object<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.end(writer, false)
    }

    fn begin_object_key<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.element(writer, first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn indented_with_list_elements_on_one_line() {
        let value = json!({
            "a": 1,
            "names": ["x", "y"],
            "rows": [{"stack": 0, "v": [1, 2]}, [3, 4]],
            "empty": [],
            "inner": {"b": {}}
        });
        let mut out = Vec::new();
        write_rows(&mut out, &value).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "{\n  \"a\": 1,\n  \"empty\": [],\n  \"inner\": {\n    \"b\": {}\n  },\n  \"names\": [\n    \"x\",\n    \"y\"\n  ],\n  \"rows\": [\n    {\"stack\": 0, \"v\": [1, 2]},\n    [3, 4]\n  ]\n}"
        );
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
    }
}
