//! A pprof profile (the one heapdiff's pipeline builds for `--format
//! pprof` and `serve`) as an OTLP profiles export: the dictionary shared by
//! one `Profile` per sample type (OTLP's `Profile` carries one), the
//! resource naming the process, the scope naming heapdiff.
//!
//! The pprof tables map one to one: the string table is kept as it is
//! (both put `""` at 0, so string indexes carry over), mappings, functions and locations get OTLP's zero
//! element at index 0 before them, each pprof sample becomes a stack
//! (shared by equal samples) and its labels attributes. A sample whose
//! value is 0 for a type is left out of that type's profile.

use crate::origin::Origin;
use crate::otlp::*;
use heapdiff::render::pprof::{PbLabel, PbProfile};
use std::collections::HashMap;

/// The OTLP export of `profile`, a dump of `origin`.
pub fn export_request(profile: &PbProfile, origin: &Origin) -> ExportProfilesServiceRequest {
    let mut dictionary = Dictionary::new(profile);
    let samples: Vec<(i32, Vec<i32>)> = profile
        .sample
        .iter()
        .map(|sample| {
            let stack = dictionary.stack(&sample.location_id);
            let attributes = sample
                .label
                .iter()
                .map(|label| dictionary.attribute(label))
                .collect();
            (stack, attributes)
        })
        .collect();
    let period_type = profile.period_type.as_ref().map(|t| ValueType {
        type_strindex: t.r#type as i32,
        unit_strindex: t.unit as i32,
    });
    let profiles = profile
        .sample_type
        .iter()
        .enumerate()
        .map(|(index, sample_type)| Profile {
            sample_type: Some(ValueType {
                type_strindex: sample_type.r#type as i32,
                unit_strindex: sample_type.unit as i32,
            }),
            samples: profile
                .sample
                .iter()
                .zip(&samples)
                .filter(|(sample, _)| sample.value.get(index).is_some_and(|&v| v != 0))
                .map(|(sample, (stack, attributes))| Sample {
                    stack_index: *stack,
                    attribute_indices: attributes.clone(),
                    values: vec![sample.value[index]],
                    ..Sample::default()
                })
                .collect(),
            time_unix_nano: origin.time_unix_ns,
            period_type: period_type.clone(),
            period: profile.period,
            ..Profile::default()
        })
        .collect();
    ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(resource(origin)),
            scope_profiles: vec![ScopeProfiles {
                scope: Some(InstrumentationScope {
                    name: "heapsample".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                }),
                profiles,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
        dictionary: Some(dictionary.finish()),
    }
}

/// The resource's attributes (OpenTelemetry semantic conventions).
fn resource(origin: &Origin) -> Resource {
    let mut attributes = vec![
        attribute("service.name", AnyValue::string(&origin.application)),
        attribute("process.pid", AnyValue::int(i64::from(origin.pid))),
        attribute(
            "process.executable.path",
            AnyValue::string(&origin.executable),
        ),
    ];
    if !origin.host.is_empty() {
        attributes.push(attribute("host.name", AnyValue::string(&origin.host)));
    }
    if let Some(container) = &origin.container {
        attributes.push(attribute("container.id", AnyValue::string(container)));
    }
    Resource {
        attributes,
        dropped_attributes_count: 0,
    }
}

fn attribute(key: &str, value: AnyValue) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(value),
    }
}

/// The dictionary being filled: pprof's tables with OTLP's zero elements.
struct Dictionary {
    tables: ProfilesDictionary,
    /// pprof location id → index in the location table.
    locations: HashMap<u64, i32>,
    stacks: HashMap<Vec<i32>, i32>,
    attributes: HashMap<(i64, i64, i64), i32>,
}

impl Dictionary {
    fn new(profile: &PbProfile) -> Dictionary {
        let mut tables = ProfilesDictionary {
            mapping_table: vec![Mapping::default()],
            location_table: vec![Location::default()],
            function_table: vec![Function::default()],
            link_table: vec![Link::default()],
            string_table: profile.string_table.clone(),
            attribute_table: vec![KeyValueAndUnit::default()],
            stack_table: vec![Stack::default()],
        };
        // pprof's table also starts with "" (heapdiff's always has it).
        if tables.string_table.is_empty() {
            tables.string_table.push(String::new());
        }
        let string = |index: i64| index as i32;
        let mut mappings = HashMap::new();
        for mapping in &profile.mapping {
            mappings.insert(mapping.id, tables.mapping_table.len() as i32);
            tables.mapping_table.push(Mapping {
                memory_start: mapping.memory_start,
                memory_limit: mapping.memory_limit,
                file_offset: mapping.file_offset,
                filename_strindex: string(mapping.filename),
                attribute_indices: Vec::new(),
            });
        }
        let mut functions = HashMap::new();
        for function in &profile.function {
            functions.insert(function.id, tables.function_table.len() as i32);
            tables.function_table.push(Function {
                name_strindex: string(function.name),
                system_name_strindex: string(function.system_name),
                filename_strindex: string(function.filename),
                start_line: 0,
            });
        }
        let mut locations = HashMap::new();
        for location in &profile.location {
            locations.insert(location.id, tables.location_table.len() as i32);
            tables.location_table.push(Location {
                mapping_index: mappings.get(&location.mapping_id).copied().unwrap_or(0),
                address: location.address,
                lines: location
                    .line
                    .iter()
                    .map(|line| Line {
                        function_index: functions.get(&line.function_id).copied().unwrap_or(0),
                        line: line.line,
                        column: 0,
                    })
                    .collect(),
                attribute_indices: Vec::new(),
            });
        }
        Dictionary {
            tables,
            locations,
            stacks: HashMap::new(),
            attributes: HashMap::new(),
        }
    }

    /// The index of the stack of these pprof locations (leaf first in
    /// both).
    fn stack(&mut self, location_ids: &[u64]) -> i32 {
        let indices: Vec<i32> = location_ids
            .iter()
            .map(|id| self.locations.get(id).copied().unwrap_or(0))
            .collect();
        let table = &mut self.tables.stack_table;
        *self.stacks.entry(indices).or_insert_with_key(|indices| {
            table.push(Stack {
                location_indices: indices.clone(),
            });
            (table.len() - 1) as i32
        })
    }

    /// The index of the attribute of a pprof label: a string or a number
    /// with its unit.
    fn attribute(&mut self, label: &PbLabel) -> i32 {
        let table = &mut self.tables.attribute_table;
        let strings = &self.tables.string_table;
        *self
            .attributes
            .entry((label.key, label.str, label.num))
            .or_insert_with(|| {
                let value = if label.str != 0 {
                    AnyValue::string(&strings[label.str as usize])
                } else {
                    AnyValue::int(label.num)
                };
                table.push(KeyValueAndUnit {
                    key_strindex: label.key as i32,
                    value: Some(value),
                    unit_strindex: label.num_unit as i32,
                });
                (table.len() - 1) as i32
            })
    }

    fn finish(self) -> ProfilesDictionary {
        self.tables
    }
}
