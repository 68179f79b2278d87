//! Registers per thread of the performance corpus's kernels, as the device's driver
//! compiles them: each kernel's WGSL goes to SPIR-V as wgpu's Vulkan backend sends it
//! (naga, the same bounds checks, no loop bounding), then to a compute pipeline created
//! with `VK_KHR_pipeline_executable_properties`, whose statistics the driver reports. A
//! kernel whose workgroup size the runtime chooses is compiled at each size it may take
//! (NVIDIA's compiler gives a kernel more or fewer registers by its size). How many values
//! a kernel keeps alive is a guess; this is what the hardware runs.
//!
//! `cargo bench --bench registers [-- --quick]`; `GRADFUSE_CORPUS_ONLY="array_ random_1"`
//! keeps the functions whose names contain one of the words. On a driver without the
//! extension (lavapipe) it compiles every kernel and says that no statistics came.
//!
//! A kernel whose arrays or spilled values live in local memory (per-thread memory behind
//! the L1 cache: arrays indexed at run time, or more values than registers) shows its
//! bytes a thread beside its registers, `243 (1776 B)`. `GRADFUSE_REGISTERS_WGSL="a.wgsl
//! b.wgsl"` compiles those files instead (variants of generated kernels, by hand or by a
//! script) and prints every statistic the driver gives, at each size.

#[path = "corpus/functions.rs"]
#[allow(dead_code)] // the families are the corpus bench's
mod functions;

use ash::vk;
use std::ffi::CStr;

/// The sizes the runtime may run a kernel at (`runtime/src/gpu/sizes.rs`).
const SIZES: [u32; 4] = [256, 128, 64, 32];

/// The override names the generated kernels declare.
const SIZE_OVERRIDE: &str = gradfuse::WORKGROUP_SIZE_OVERRIDE;
const BYTES_OVERRIDE: &str = gradfuse::WORKGROUP_BYTES_OVERRIDE;

type Failure = Box<dyn std::error::Error>;

/// `wgsl`'s SPIR-V with its overrides set (`size` where it declares the workgroup size's,
/// `bytes` where it declares the workgroup memory's), and its entry point's name.
fn spirv(wgsl: &str, size: u32, bytes: u32) -> Result<(Vec<u32>, String), Failure> {
    let module = naga::front::wgsl::parse_str(wgsl).map_err(|e| e.emit_to_string(wgsl))?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)?;
    let mut constants = naga::back::PipelineConstants::default();
    for (name, value) in [(SIZE_OVERRIDE, size), (BYTES_OVERRIDE, bytes)] {
        if wgsl.contains(&format!("override {name}:")) {
            constants.insert(name.into(), f64::from(value));
        }
    }
    let (module, info) =
        naga::back::pipeline_constants::process_overrides(&module, &info, None, &constants)?;
    let entry = module.entry_points[0].name.clone();
    let mut options = naga::back::spv::Options {
        lang_version: (1, 3),
        ..Default::default()
    };
    // As wgpu's Vulkan backend with the runtime's checks: index bounds restricted, buffer
    // bounds left to robust buffer access, and no loop bounding.
    options.bounds_check_policies = naga::proc::BoundsCheckPolicies {
        index: naga::proc::BoundsCheckPolicy::Restrict,
        buffer: naga::proc::BoundsCheckPolicy::Unchecked,
        image_load: naga::proc::BoundsCheckPolicy::Unchecked,
        binding_array: naga::proc::BoundsCheckPolicy::Unchecked,
    };
    options.force_loop_bounding = false;
    let pipeline = naga::back::spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: entry.clone(),
    };
    let words = naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline))?;
    Ok((words, entry))
}

/// A Vulkan device on the first discrete GPU (else any), with pipeline statistics where the
/// driver has them.
struct Driver {
    device: ash::Device,
    statistics: Option<ash::khr::pipeline_executable_properties::Device>,
    name: String,
    workgroup_bytes: u32,
}

impl Driver {
    fn open() -> Result<Driver, Failure> {
        // SAFETY: the loader is the system's Vulkan loader; every handle made here is used
        // only while `instance` lives (the process's lifetime: nothing is destroyed).
        unsafe {
            let entry = ash::Entry::load()?;
            let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
            let create = vk::InstanceCreateInfo::default().application_info(&app);
            let instance = entry.create_instance(&create, None)?;
            let gpus = instance.enumerate_physical_devices()?;
            let rank = |p: &vk::PhysicalDevice| {
                let t = instance.get_physical_device_properties(*p).device_type;
                u8::from(t == vk::PhysicalDeviceType::DISCRETE_GPU)
            };
            let gpu = gpus
                .iter()
                .copied()
                .max_by_key(rank)
                .ok_or("no Vulkan device")?;
            let properties = instance.get_physical_device_properties(gpu);
            let name = CStr::from_ptr(properties.device_name.as_ptr()).to_string_lossy();
            let priorities = [1.0f32];
            let queues = [vk::DeviceQueueCreateInfo::default()
                .queue_family_index(0)
                .queue_priorities(&priorities)];
            let features = vk::PhysicalDeviceFeatures::default()
                .shader_float64(true)
                .shader_int64(true);
            let extensions = [ash::khr::pipeline_executable_properties::NAME.as_ptr()];
            let mut executable =
                vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default()
                    .pipeline_executable_info(true);
            let with = vk::DeviceCreateInfo::default()
                .queue_create_infos(&queues)
                .enabled_extension_names(&extensions)
                .enabled_features(&features)
                .push_next(&mut executable);
            let (device, has) = match instance.create_device(gpu, &with, None) {
                Ok(d) => (d, true),
                Err(_) => {
                    let without = vk::DeviceCreateInfo::default()
                        .queue_create_infos(&queues)
                        .enabled_features(&features);
                    (instance.create_device(gpu, &without, None)?, false)
                }
            };
            let statistics = has
                .then(|| ash::khr::pipeline_executable_properties::Device::new(&instance, &device));
            Ok(Driver {
                device,
                statistics,
                name: name.into_owned(),
                workgroup_bytes: properties.limits.max_compute_shared_memory_size,
            })
        }
    }

    /// The driver's statistics of `wgsl` compiled at workgroup size `size`, as
    /// `name=value` pairs (none without the extension).
    fn statistics(&self, wgsl: &str, size: u32) -> Result<Vec<(String, String)>, Failure> {
        let (words, entry) = spirv(wgsl, size, self.workgroup_bytes)?;
        let entry = std::ffi::CString::new(entry)?;
        // Each binding the WGSL declares, uniform or storage, in set 0.
        let bindings: Vec<vk::DescriptorSetLayoutBinding> = (wgsl.lines())
            .filter_map(|line| {
                let rest = line.trim().strip_prefix("@group(0) @binding(")?;
                let binding: u32 = rest.split(')').next()?.parse().ok()?;
                let ty = if line.contains("var<uniform>") {
                    vk::DescriptorType::UNIFORM_BUFFER
                } else {
                    vk::DescriptorType::STORAGE_BUFFER
                };
                Some(
                    vk::DescriptorSetLayoutBinding::default()
                        .binding(binding)
                        .descriptor_type(ty)
                        .descriptor_count(1)
                        .stage_flags(vk::ShaderStageFlags::COMPUTE),
                )
            })
            .collect();
        let flags = if self.statistics.is_some() {
            vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR
        } else {
            vk::PipelineCreateFlags::empty()
        };
        // SAFETY: every create info points at locals that outlive the call; the objects
        // are destroyed before returning, the pipeline after its statistics are read.
        unsafe {
            let d = &self.device;
            let module_info = vk::ShaderModuleCreateInfo::default().code(&words);
            let module = d.create_shader_module(&module_info, None)?;
            let set_info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
            let set = d.create_descriptor_set_layout(&set_info, None)?;
            let sets = [set];
            let layout_info = vk::PipelineLayoutCreateInfo::default().set_layouts(&sets);
            let layout = d.create_pipeline_layout(&layout_info, None)?;
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(module)
                .name(&entry);
            let info = [vk::ComputePipelineCreateInfo::default()
                .stage(stage)
                .layout(layout)
                .flags(flags)];
            let created = d.create_compute_pipelines(vk::PipelineCache::null(), &info, None);
            let mut out = Vec::new();
            if let (Ok(pipelines), Some(stats)) = (&created, &self.statistics) {
                let of = vk::PipelineInfoKHR::default().pipeline(pipelines[0]);
                let executables = stats.get_pipeline_executable_properties(&of)?;
                for k in 0..executables.len() as u32 {
                    let which = vk::PipelineExecutableInfoKHR::default()
                        .pipeline(pipelines[0])
                        .executable_index(k);
                    for s in stats.get_pipeline_executable_statistics(&which)? {
                        out.push((
                            CStr::from_ptr(s.name.as_ptr())
                                .to_string_lossy()
                                .into_owned(),
                            statistic_value(&s),
                        ));
                    }
                }
            }
            if let Ok(pipelines) = &created {
                d.destroy_pipeline(pipelines[0], None);
            }
            d.destroy_pipeline_layout(layout, None);
            d.destroy_descriptor_set_layout(set, None);
            d.destroy_shader_module(module, None);
            created.map_err(|(_, e)| e)?;
            Ok(out)
        }
    }
}

/// A statistic's value as text, by its format.
fn statistic_value(s: &vk::PipelineExecutableStatisticKHR) -> String {
    // SAFETY: the union is read as the member its `format` names.
    unsafe {
        match s.format {
            vk::PipelineExecutableStatisticFormatKHR::BOOL32 => s.value.b32.to_string(),
            vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64.to_string(),
            vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64.to_string(),
            _ => s.value.f64.to_string(),
        }
    }
}

/// The register count among `stats` and the local memory a thread uses where it uses any,
/// or "-" where the driver gave no count.
fn registers(stats: &[(String, String)]) -> String {
    let found = stats.iter().find(|(name, _)| name.contains("Register"));
    let Some((_, count)) = found else {
        return "-".to_string();
    };
    let local = stats.iter().find(|(name, _)| name.contains("Local Memory"));
    match local
        .and_then(|(_, v)| v.parse::<u64>().ok())
        .map(local_bytes)
    {
        Some(bytes) if bytes > 0 => format!("{count} ({bytes} B)"),
        _ => count.clone(),
    }
}

/// Bytes a thread of local memory, from the driver's statistic. NVIDIA's Vulkan driver
/// reports 2^36 plus the bytes: kernels without arrays read 68719476736 exactly, the
/// 8-64-64-1 network's adjoint (arrays indexed by its loops' trips) 1,776 more.
fn local_bytes(reported: u64) -> u64 {
    reported & 0xffff_ffff
}

/// The workgroup sizes kernel `wgsl` may run at, each as `(the override's value to compile
/// it with, its size)`: every one of [`SIZES`] where the runtime sizes it, else the one its
/// `@workgroup_size` names (the cooperative network kernels declare 128 or 256), which a
/// label of the override's value would misname.
fn sizes_of(wgsl: &str) -> Vec<(u32, u32)> {
    if wgsl.contains(&format!("override {SIZE_OVERRIDE}:")) {
        return SIZES.iter().map(|&s| (s, s)).collect();
    }
    let declared = wgsl.split("@workgroup_size(").nth(1).and_then(|rest| {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    });
    // The override's value is unused where the kernel declares no override.
    vec![(SIZES[0], declared.unwrap_or(SIZES[0]))]
}

/// Every statistic of the WGSL files `paths`, at each size a kernel may run at.
fn files(driver: &Driver, paths: &str) -> Result<(), Failure> {
    for path in paths.split_whitespace() {
        let wgsl = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        for (override_size, size) in sizes_of(&wgsl) {
            let stats = driver.statistics(&wgsl, override_size)?;
            let line: Vec<String> = (stats.iter())
                .map(
                    |(name, v)| match (name.contains("Local Memory"), v.parse()) {
                        (true, Ok(r)) => format!("{name}={} B", local_bytes(r)),
                        _ => format!("{name}={v}"),
                    },
                )
                .collect();
            println!("{path} @{size}: {}", line.join(", "));
        }
    }
    Ok(())
}

fn main() -> Result<(), Failure> {
    let quick = std::env::args().any(|a| a == "--quick");
    let only = std::env::var("GRADFUSE_CORPUS_ONLY").ok();
    let driver = Driver::open()?;
    if let Ok(paths) = std::env::var("GRADFUSE_REGISTERS_WGSL") {
        return files(&driver, &paths);
    }
    println!(
        "{}: registers per thread, at each workgroup size a kernel may run at\n\n\
         | function | kernel | 256 | 128 | 64 | 32 |\n|---|---|---|---|---|---|",
        driver.name
    );
    let mut any = false;
    for (k, f) in functions::corpus().iter().enumerate() {
        let wanted = only
            .as_ref()
            .is_none_or(|o| o.split_whitespace().any(|w| f.name.contains(w)));
        if !wanted || (quick && k % 8 != 0) {
            continue;
        }
        let c =
            gradfuse_shaders_gen::compile_str(&f.src).map_err(|e| format!("{}: {e:?}", f.name))?;
        for (kind, wgsl) in [
            ("forward", &c.wgsl_forward),
            ("reverse", &c.wgsl_reverse),
            ("tangent", &c.wgsl_tangent),
        ] {
            // A kernel of one declared size shows its count in that size's column (or the
            // first, with the size beside it, for a size the runtime never chooses).
            let mut row = vec![String::new(); SIZES.len()];
            for (override_size, size) in sizes_of(wgsl) {
                let stats = driver.statistics(wgsl, override_size)?;
                any |= !stats.is_empty();
                match SIZES.iter().position(|&s| s == size) {
                    Some(column) => row[column] = registers(&stats),
                    None => row[0] = format!("{} (@{size})", registers(&stats)),
                }
            }
            println!("| {} | {kind} | {} |", f.name, row.join(" | "));
        }
    }
    if !any {
        println!("\nNo statistics: the driver lacks VK_KHR_pipeline_executable_properties.");
    }
    Ok(())
}
