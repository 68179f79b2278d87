//! How many workgroups a reducing launch is cut into: one wave of the device's
//! multiprocessors where the driver tells their count and the kernel's workgroup memory
//! tells how many of its workgroups one holds, [`REDUCE_GROUPS`] otherwise.
//!
//! A reducing launch runs each workgroup over many chunks of elements and pays a prologue
//! (its weights into workgroup memory), the partial sums and a cold first chunk once a
//! workgroup. Its 512 workgroups are 3.9 waves of the H100's 132 multiprocessors for the
//! 8-64-64-1 network's adjoint (one workgroup each: its matrices fill the 48 KiB), the last
//! one 12% empty; in one wave it ran 0.997 ms at 2^20 and 14.80 at 2^24 against 1.017 and
//! 15.23, every cooperative network adjoint measured 1-7% faster (BENCHMARKS.md, "More
//! warps, the output sums, and one wave"). wgpu does not report the
//! multiprocessors; NVIDIA's Vulkan driver does, through `VK_NV_shader_sm_builtins`.

use super::{Gpu, REDUCE_GROUPS};
use crate::spec::KernelSpec;
use std::sync::atomic::Ordering;

/// The workgroups of a reducing launch of `spec` that fill `multiprocessors` once, or
/// `None` where that is not known: the count is unknown (0), or `spec` declares no
/// workgroup memory ([`KernelSpec::workgroup_bytes`]), so that its registers, which the
/// runtime cannot see, may decide how many workgroups a multiprocessor holds.
///
/// A multiprocessor holds as many of `spec`'s workgroups as `device_bytes` (the device's
/// workgroup memory limit) has room for: NVIDIA's Vulkan driver gives a multiprocessor no
/// more workgroup memory in all than one workgroup's limit, 48 KiB (measured on the H100:
/// two workgroups of 24,064 bytes, one of 25,088; BENCHMARKS.md, "Workgroups a
/// multiprocessor"). The cooperative network kernels, the only ones that declare their
/// memory, keep their registers within what that many workgroups leave.
pub(super) fn one_wave(spec: &KernelSpec, multiprocessors: u32, device_bytes: u32) -> Option<u64> {
    if multiprocessors == 0 || spec.workgroup_bytes == 0 {
        return None;
    }
    let sharing = (device_bytes / spec.workgroup_bytes).max(1);
    Some(multiprocessors as u64 * sharing as u64)
}

impl Gpu {
    /// The most workgroups of a reducing launch of `spec` on this device ([`one_wave`],
    /// else [`REDUCE_GROUPS`]).
    pub(super) fn reduce_groups(&self, spec: &KernelSpec) -> u64 {
        let multiprocessors = self.multiprocessors.load(Ordering::Relaxed);
        one_wave(spec, multiprocessors, self.workgroup_bytes()).unwrap_or(REDUCE_GROUPS)
    }

    /// The workgroups a launch of `spec` (the kernel it runs) over `n` elements dispatches
    /// ([`crate::Device::launch_workgroups`]).
    pub(crate) fn launch_workgroups(&self, spec: &'static KernelSpec, n: usize) -> u32 {
        self.runnable(spec)
            .map_or(0, |spec| self.launch_shape(spec, n).groups())
    }

    /// Takes the device to have `count` multiprocessors (0: unknown), for tests
    /// ([`crate::Device::set_multiprocessors`]).
    pub(crate) fn set_multiprocessors(&self, count: u32) {
        self.multiprocessors.store(count, Ordering::Relaxed);
    }
}

/// The multiprocessors of `device` where its driver reports them (NVIDIA's Vulkan driver,
/// `VK_NV_shader_sm_builtins`); `None` on any other driver or backend.
pub(super) fn multiprocessors(device: &wgpu::Device) -> Option<u32> {
    #[cfg(not(any(target_arch = "wasm32", target_vendor = "apple")))]
    {
        // SAFETY: the hal device is held only to copy out its instance and physical
        // device, which live as long as `device`; the queries below change nothing.
        let (instance, physical, version) = {
            let hal = unsafe { device.as_hal::<wgpu::hal::api::Vulkan>() }?;
            let shared = hal.shared_instance();
            (
                shared.raw_instance().clone(),
                hal.raw_physical_device(),
                shared.instance_api_version(),
            )
        };
        use ash::vk;
        // `vkGetPhysicalDeviceProperties2` is core from Vulkan 1.1.
        if version < vk::API_VERSION_1_1 {
            return None;
        }
        let extensions =
            unsafe { instance.enumerate_device_extension_properties(physical) }.ok()?;
        let reported = extensions
            .iter()
            .any(|e| e.extension_name_as_c_str() == Ok(vk::NV_SHADER_SM_BUILTINS_NAME));
        if !reported {
            return None;
        }
        let mut sm = vk::PhysicalDeviceShaderSMBuiltinsPropertiesNV::default();
        let mut properties = vk::PhysicalDeviceProperties2::default().push_next(&mut sm);
        unsafe { instance.get_physical_device_properties2(physical, &mut properties) };
        (sm.shader_sm_count > 0).then_some(sm.shader_sm_count)
    }
    #[cfg(any(target_arch = "wasm32", target_vendor = "apple"))]
    {
        let _ = device;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(workgroup_bytes: u32) -> KernelSpec {
        KernelSpec {
            workgroup_bytes,
            ..crate::spec::TEST_SPEC
        }
    }

    #[test]
    fn one_wave_is_the_multiprocessors_times_the_workgroups_their_memory_holds() {
        // The H100's 132 multiprocessors, its driver's 48 KiB.
        let bytes = 48 * 1024;
        assert_eq!(one_wave(&spec(22_288), 132, bytes), Some(264));
        assert_eq!(one_wave(&spec(24_576), 132, bytes), Some(264));
        assert_eq!(one_wave(&spec(24_577), 132, bytes), Some(132));
        assert_eq!(one_wave(&spec(48 * 1024), 132, bytes), Some(132));
        assert_eq!(one_wave(&spec(15_000), 132, bytes), Some(396));
        // Unknown multiprocessors, or a kernel whose registers may decide: the default.
        assert_eq!(one_wave(&spec(22_288), 0, bytes), None);
        assert_eq!(one_wave(&spec(0), 132, bytes), None);
    }
}
