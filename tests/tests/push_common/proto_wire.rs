//! A protobuf decoder driven by `.proto` files read at test time (the
//! vendored opentelemetry-proto definitions in `dump-tool/proto/`), not
//! by heapdiff's `prost` structs: it reads each message's fields (name,
//! number, type, `repeated`) from the files and walks the wire format by
//! them, into JSON (`serde_json::Value`) keyed by the `.proto` field names.
//! A field number the files do not declare, or a wire type that does not
//! fit the declared type, fails the decode: where heapdiff's hand-declared
//! structs and the published definitions disagree, this decoder says so.

use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::path::Path;

#[derive(Clone, Debug)]
struct Field {
    name: String,
    kind: String,
    repeated: bool,
}

/// Every message of the files, by its simple name (unique across the
/// files read here).
pub struct Schema {
    messages: HashMap<String, HashMap<u64, Field>>,
}

impl Schema {
    pub fn read(files: &[&Path]) -> Schema {
        let mut messages = HashMap::new();
        for file in files {
            let text = std::fs::read_to_string(file).unwrap();
            parse(&text, &mut messages);
        }
        Schema { messages }
    }

    /// Decode `bytes` as the message `name`.
    pub fn decode(&self, name: &str, bytes: &[u8]) -> Result<Value, String> {
        let fields = self
            .messages
            .get(name)
            .ok_or_else(|| format!("no message {name} in the .proto files"))?;
        let mut out = Map::new();
        let mut at = 0;
        while at < bytes.len() {
            let tag = varint(bytes, &mut at)?;
            let (number, wire) = (tag >> 3, tag & 7);
            let field = fields
                .get(&number)
                .ok_or_else(|| format!("{name}: field {number} is not in the .proto"))?;
            let values = self.value(name, field, wire, bytes, &mut at)?;
            for value in values {
                if field.repeated {
                    out.entry(field.name.clone())
                        .or_insert_with(|| json!([]))
                        .as_array_mut()
                        .unwrap()
                        .push(value);
                } else {
                    out.insert(field.name.clone(), value);
                }
            }
        }
        Ok(Value::Object(out))
    }

    fn value(
        &self,
        message: &str,
        field: &Field,
        wire: u64,
        bytes: &[u8],
        at: &mut usize,
    ) -> Result<Vec<Value>, String> {
        let mismatch = || {
            format!(
                "{message}.{}: wire type {wire} for {}",
                field.name, field.kind
            )
        };
        let scalar_varint = matches!(
            field.kind.as_str(),
            "int32" | "int64" | "uint32" | "uint64" | "bool"
        );
        match (field.kind.as_str(), wire) {
            (kind, 0) if scalar_varint => Ok(vec![varint_value(kind, varint(bytes, at)?)]),
            ("fixed64", 1) => Ok(vec![json!(fixed64(bytes, at)?)]),
            ("double", 1) => Ok(vec![json!(f64::from_bits(fixed64(bytes, at)?))]),
            (kind, 2) => {
                let length = varint(bytes, at)? as usize;
                let end = at.checked_add(length).filter(|&e| e <= bytes.len());
                let end = end.ok_or_else(|| format!("{message}.{}: truncated", field.name))?;
                let inner = &bytes[*at..end];
                *at = end;
                match kind {
                    "string" => Ok(vec![json!(
                        String::from_utf8(inner.to_vec()).map_err(|e| e.to_string())?
                    )]),
                    "bytes" => Ok(vec![json!(inner)]),
                    "fixed64" if field.repeated => {
                        let mut i = 0;
                        let mut values = Vec::new();
                        while i < inner.len() {
                            values.push(json!(fixed64(inner, &mut i)?));
                        }
                        Ok(values)
                    }
                    kind if scalar_varint && field.repeated => {
                        let mut i = 0;
                        let mut values = Vec::new();
                        while i < inner.len() {
                            values.push(varint_value(kind, varint(inner, &mut i)?));
                        }
                        Ok(values)
                    }
                    kind if self.messages.contains_key(kind) => Ok(vec![self.decode(kind, inner)?]),
                    _ => Err(mismatch()),
                }
            }
            _ => Err(mismatch()),
        }
    }
}

fn varint_value(kind: &str, raw: u64) -> Value {
    match kind {
        "int32" => json!(raw as i64 as i32),
        "int64" => json!(raw as i64),
        "bool" => json!(raw != 0),
        _ => json!(raw),
    }
}

fn varint(bytes: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at).ok_or("truncated varint")?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("varint too long".into())
}

fn fixed64(bytes: &[u8], at: &mut usize) -> Result<u64, String> {
    let slice = bytes.get(*at..*at + 8).ok_or("truncated fixed64")?;
    *at += 8;
    Ok(u64::from_le_bytes(slice.try_into().unwrap()))
}

/// The messages of one file: `message Name {` blocks (nested `oneof`
/// blocks' fields belong to the message), fields `[repeated] TYPE name = N;`
/// with comments stripped; a qualified type keeps its last part.
fn parse(text: &str, messages: &mut HashMap<String, HashMap<u64, Field>>) {
    let mut current: Option<String> = None;
    let mut depth = 0;
    for line in text.lines() {
        let line = line.split("//").next().unwrap().trim();
        if let Some(rest) = line.strip_prefix("message ") {
            let name = rest.trim_end_matches('{').trim().to_string();
            messages.insert(name.clone(), HashMap::new());
            current = Some(name);
            depth = 1;
            continue;
        }
        let Some(name) = &current else { continue };
        if line.ends_with('{') {
            depth += 1;
            continue;
        }
        if line.starts_with('}') {
            depth -= 1;
            if depth == 0 {
                current = None;
            }
            continue;
        }
        let Some((declaration, number)) = line.trim_end_matches(';').split_once('=') else {
            continue;
        };
        let words: Vec<&str> = declaration.split_whitespace().collect();
        let (repeated, kind, field) = match words.as_slice() {
            ["repeated", kind, field] => (true, *kind, *field),
            [kind, field] if *kind != "option" => (false, *kind, *field),
            _ => continue,
        };
        let Ok(number) = number.trim().parse::<u64>() else {
            continue;
        };
        let kind = kind.rsplit('.').next().unwrap().to_string();
        messages.get_mut(name).unwrap().insert(
            number,
            Field {
                name: field.to_string(),
                kind,
                repeated,
            },
        );
    }
}
