//! Building the pprof message of a view: strings, functions, locations and
//! mappings interned while samples are added, base samples negated. Each
//! sample is encoded as it is added (a large view has hundreds of thousands
//! of them: their encoding is a third of their structs' size), the rest of
//! the message at the end ([`Encoded`]).

use super::proto::{
    PbFunction, PbLabel, PbLine, PbLocation, PbMapping, PbProfile, PbSample, PbValueType,
};
use crate::model::{Metric, Profile, Sample};
use crate::pipeline::View;
use crate::render::round;
use crate::symbols::runtime::kind_name;
use crate::symbols::{Line, LocationId, LocationTable, ModuleId, ModuleRecord, hex};
use heapsample_format::FrameKind;
use std::collections::HashMap;

/// What the profile needs beyond the view.
#[derive(Clone, Debug, Default)]
pub struct PprofOptions {
    /// The main executable's path: its mapping goes first.
    pub executable: String,
    pub time_unix_ns: u64,
    pub comments: Vec<String>,
}

/// The sample types in file order; `default_sample_type` picks one. The
/// last two only when the dumps carry lifetimes.
const SAMPLE_TYPES: [(&str, &str); 6] = [
    ("alloc_objects", "count"),
    ("alloc_space", "bytes"),
    ("inuse_objects", "count"),
    ("inuse_space", "bytes"),
    ("temp_objects", "count"),
    ("temp_space", "bytes"),
];

/// Interns strings, functions, locations and mappings while samples are added.
pub struct Builder<'a> {
    table: &'a LocationTable,
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    functions: Vec<PbFunction>,
    function_ids: HashMap<(String, Option<String>, Option<ModuleId>), u64>,
    locations: Vec<PbLocation>,
    location_ids: HashMap<(LocationId, usize), u64>,
    mapping_ids: HashMap<usize, u64>,
    mapping_order: Vec<usize>,
    /// The samples added so far, encoded as `Profile.sample` fields.
    samples: Vec<u8>,
    /// How many of [`SAMPLE_TYPES`] the samples carry.
    types: usize,
}

impl<'a> Builder<'a> {
    pub fn new(table: &'a LocationTable, executable: &str) -> Self {
        let mut builder = Builder {
            table,
            strings: vec![String::new()],
            string_ids: HashMap::from([(String::new(), 0)]),
            functions: Vec::new(),
            function_ids: HashMap::new(),
            locations: Vec::new(),
            location_ids: HashMap::new(),
            mapping_ids: HashMap::new(),
            mapping_order: Vec::new(),
            samples: Vec::new(),
            types: 4,
        };
        builder.order_mappings(executable);
        builder
    }

    /// Also the temporary allocations' sample types (dumps with lifetimes).
    pub fn with_temporary(mut self) -> Self {
        self.types = SAMPLE_TYPES.len();
        self
    }

    /// Mapping ids follow module order, with the executable first.
    fn order_mappings(&mut self, executable: &str) {
        let mut modules: Vec<usize> = (0..self.table.modules.len()).collect();
        modules.sort_by_key(|&m| self.table.modules[m].path != executable);
        for (index, module) in modules.into_iter().enumerate() {
            self.mapping_ids.insert(module, index as u64 + 1);
            self.mapping_order.push(module);
        }
    }

    fn string(&mut self, text: &str) -> i64 {
        if let Some(&id) = self.string_ids.get(text) {
            return id;
        }
        let id = self.strings.len() as i64;
        self.strings.push(text.to_string());
        self.string_ids.insert(text.to_string(), id);
        id
    }

    /// Add every sample of `profile`, values multiplied by `sign`. Base
    /// samples (`sign < 0`) carry `pprof::base`, as `pprof -diff_base`
    /// marks them, so percentages are of the new profile.
    pub fn add_profile(&mut self, profile: &Profile, sign: i64) {
        for sample in &profile.samples {
            let mut value = sample_values(sample, sign);
            value.truncate(self.types);
            if value.iter().all(|&v| v == 0) {
                continue;
            }
            let location_id = self.sample_locations(sample);
            let mut label = self.size_label(sample);
            label.extend(self.thread_labels(profile, sample.thread));
            if sign < 0 {
                label.push(self.string_label("pprof::base", "true"));
            }
            let sample = PbSample {
                location_id,
                value,
                label,
            };
            prost::encoding::message::encode(SAMPLE_FIELD, &sample, &mut self.samples);
        }
    }

    /// pprof locations of a sample, leaf first. A location whose innermost
    /// lines were dropped (allocator frames) becomes its own trimmed location.
    fn sample_locations(&mut self, sample: &Sample) -> Vec<u64> {
        let mut ids = Vec::new();
        let mut previous = None;
        for frame in &sample.frames {
            if previous == Some(frame.location()) {
                continue;
            }
            previous = Some(frame.location());
            ids.push(self.location(frame.location(), frame.line()));
        }
        ids
    }

    fn location(&mut self, location: LocationId, first_line: usize) -> u64 {
        if let Some(&id) = self.location_ids.get(&(location, first_line)) {
            return id;
        }
        let Some(source) = self.table.locations.get(location) else {
            return 0;
        };
        // Unresolved addresses stay addresses (no lines), so pprof can
        // symbolize them from the binary the mapping names.
        let lines = if source.resolved {
            source.lines.get(first_line..).unwrap_or_default().to_vec()
        } else {
            Vec::new()
        };
        let line = lines
            .iter()
            .map(|l| PbLine {
                function_id: self.function(l, source.module),
                line: i64::from(l.line),
            })
            .collect();
        let id = self.locations.len() as u64 + 1;
        let mapping_id = source
            .module
            .and_then(|m| self.mapping_ids.get(&m))
            .copied()
            .unwrap_or(0);
        self.locations.push(PbLocation {
            id,
            mapping_id,
            address: source.address.saturating_sub(1),
            line,
        });
        self.location_ids.insert((location, first_line), id);
        id
    }

    /// The function of a line: its full name, qualified by its module when
    /// another module defines the same name (never merged).
    fn function(&mut self, line: &Line, module: Option<ModuleId>) -> u64 {
        let name = match &line.qualifier {
            Some(qualifier) => format!("{} [{qualifier}]", line.function),
            None => line.function.clone(),
        };
        let file = line.file.clone();
        let key = (name.clone(), file.clone(), module);
        if let Some(&id) = self.function_ids.get(&key) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        // Code a runtime generated says its kind in the system name
        // (`javascript:handleRequest (leak.js)`); native code's is its name.
        let system_name = match line.kind {
            FrameKind::Native => self.string(&name),
            kind => self.string(&format!("{}:{name}", kind_name(kind))),
        };
        let name = self.string(&name);
        let filename = self.string(file.as_deref().unwrap_or(""));
        self.functions.push(PbFunction {
            id,
            name,
            system_name,
            filename,
        });
        self.function_ids.insert(key, id);
        id
    }

    fn string_label(&mut self, key: &str, value: &str) -> PbLabel {
        PbLabel {
            key: self.string(key),
            str: self.string(value),
            num: 0,
            num_unit: 0,
        }
    }

    /// `thread` (its name) and `tid`, for `-tagfocus` and `-tags`.
    fn thread_labels(&mut self, profile: &Profile, serial: u32) -> Vec<PbLabel> {
        let Some(thread) = profile.thread(serial) else {
            return Vec::new();
        };
        let (name, tid) = (thread.name.clone(), thread.tid);
        let mut labels = Vec::new();
        if !name.is_empty() {
            labels.push(self.string_label("thread", &name));
        }
        labels.push(PbLabel {
            key: self.string("tid"),
            str: 0,
            num: i64::from(tid),
            num_unit: 0,
        });
        labels
    }

    /// pprof's heap label `bytes`: the average object size.
    fn size_label(&mut self, sample: &Sample) -> Vec<PbLabel> {
        let v = &sample.values;
        let (objects, bytes) = if v.alloc_objects > 0.0 {
            (v.alloc_objects, v.alloc_space)
        } else {
            (v.inuse_objects, v.inuse_space)
        };
        if objects <= 0.0 {
            return Vec::new();
        }
        let key = self.string("bytes");
        let num_unit = self.string("bytes");
        vec![PbLabel {
            key,
            str: 0,
            num: round(bytes / objects),
            num_unit,
        }]
    }

    fn mappings(&mut self) -> Vec<PbMapping> {
        let order = self.mapping_order.clone();
        let table = self.table;
        order
            .into_iter()
            .map(|module| {
                let record = &table.modules[module];
                let (path, build_id) = (record.path.clone(), hex(&record.build_id));
                let functions = all_resolved(table, module);
                let lines = functions && record.has_debug_info;
                let id = self.mapping_ids.get(&module).copied().unwrap_or(0);
                let file_offset = record
                    .file_offset
                    .unwrap_or_else(|| guessed_file_offset(record));
                PbMapping {
                    id,
                    memory_start: record.memory_start,
                    memory_limit: record.memory_limit,
                    file_offset,
                    filename: self.string(&path),
                    build_id: self.string(&build_id),
                    has_functions: functions,
                    has_filenames: lines,
                    has_line_numbers: lines,
                    has_inline_frames: lines,
                }
            })
            .collect()
    }

    pub fn finish(mut self, view: &View<'_>, options: &PprofOptions) -> Encoded {
        let sample_type = SAMPLE_TYPES[..self.types]
            .iter()
            .map(|(kind, unit)| PbValueType {
                r#type: self.string(kind),
                unit: self.string(unit),
            })
            .collect();
        let period_type = Some(PbValueType {
            r#type: self.string("space"),
            unit: self.string("bytes"),
        });
        let default_sample_type = self.string(sample_type_name(view.metric));
        let spec = view.spec.summary();
        let comment = options
            .comments
            .iter()
            .chain(std::iter::once(&spec))
            .map(|c| self.string(c))
            .collect();
        let mapping = self.mappings();
        let rest = PbProfile {
            sample_type,
            sample: Vec::new(),
            mapping,
            location: self.locations,
            function: self.functions,
            string_table: self.strings,
            time_nanos: i64::try_from(options.time_unix_ns).unwrap_or(i64::MAX),
            period_type,
            period: i64::try_from(view.new.profile.period).unwrap_or(i64::MAX),
            comment,
            default_sample_type,
        };
        Encoded {
            rest,
            samples: self.samples,
        }
    }
}

/// The field number of `Profile.sample` in `profile.proto`.
const SAMPLE_FIELD: u32 = 2;

/// A profile as built: its samples encoded, everything else as a message.
/// Protobuf fields may come in any order and a repeated field's elements
/// add up wherever they are, so `rest`'s encoding followed by `samples` is
/// the whole profile's encoding.
pub struct Encoded {
    /// The profile without its samples.
    pub rest: PbProfile,
    /// The samples, encoded as `Profile.sample` fields.
    pub samples: Vec<u8>,
}

/// The file offset of a mapping whose file heapdiff could not read, as
/// linkers lay files out: a non-PIE x86-64 executable (no load bias) is
/// linked at 0x400000 with its file mapped from there; shared objects and
/// PIEs have `p_offset == p_vaddr`.
fn guessed_file_offset(record: &ModuleRecord) -> u64 {
    /// GNU ld's default image base for x86-64 executables.
    const EXECUTABLE_BASE: u64 = 0x40_0000;
    let address = record.memory_start.wrapping_sub(record.load_bias);
    if record.load_bias == 0 && address >= EXECUTABLE_BASE {
        address - EXECUTABLE_BASE
    } else {
        address
    }
}

/// True if every location of `module` was symbolized: only then may pprof
/// be told the mapping has functions (else it would not symbolize it).
fn all_resolved(table: &LocationTable, module: ModuleId) -> bool {
    let mut locations = table
        .locations
        .iter()
        .filter(|l| l.module == Some(module))
        .peekable();
    locations.peek().is_some() && locations.all(|l| l.resolved)
}

/// The values in [`SAMPLE_TYPES`]' order, times `sign`.
fn sample_values(sample: &Sample, sign: i64) -> Vec<i64> {
    let v = &sample.values;
    [
        v.alloc_objects,
        v.alloc_space,
        v.inuse_objects,
        v.inuse_space,
        v.temp_objects,
        v.temp_space,
    ]
    .iter()
    .map(|&x| round(x) * sign)
    .collect()
}

fn sample_type_name(metric: Metric) -> &'static str {
    match metric {
        Metric::AllocObjects => "alloc_objects",
        Metric::AllocSpace => "alloc_space",
        Metric::InuseObjects => "inuse_objects",
        Metric::InuseSpace => "inuse_space",
        Metric::TempObjects => "temp_objects",
        Metric::TempSpace => "temp_space",
    }
}
