//! Upload staging in host memory, made through wgpu's Vulkan interop.
//!
//! wgpu places every buffer the CPU maps for writing in device memory the CPU reaches
//! across the PCIe BAR (gpu-allocator's `CpuToGpu` prefers `DEVICE_LOCAL | HOST_VISIBLE`),
//! so an upload is the CPU's stores over the link: 29 GB/s with 16 threads on the H100,
//! where the GPU's own DMA from host memory runs at 51-55 GB/s and 16 threads copy host
//! memory at 52 GB/s (BENCHMARKS.md, "What staging in host memory could reach"). Here a
//! buffer is made in host-visible memory that is *not* device-local, mapped once and kept
//! mapped: the CPU copies into it at host-memory speed and a buffer copy moves it with the
//! DMA engines. Elsewhere (no Vulkan, no such memory type on a discrete GPU) there is none,
//! and uploads stay on wgpu's mapped buffers.

use super::Gpu;
use std::ptr::NonNull;

/// A buffer in host memory, mapped for the whole of its life: the CPU writes and reads it
/// through its pointer, and the GPU's copies read and write it. The memory is the
/// buffer's (wgpu frees both once the buffer is dropped and the GPU is done with it).
pub(super) struct HostBuffer {
    pub(super) buffer: wgpu::Buffer,
    mapped: NonNull<u8>,
    len: usize,
}

// SAFETY: the pointer is to memory mapped for as long as `buffer` lives, written only
// through `&mut HostBuffer` (one writer), and never while a submission reading it runs
// (the callers wait for it first).
unsafe impl Send for HostBuffer {}
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
    /// The mapped bytes, to write.
    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: `mapped` points to `len` bytes of host-coherent memory mapped while the
        // buffer lives; `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.mapped.as_ptr(), self.len) }
    }

    /// The first mapped byte (at least 64-byte aligned: Vulkan's `minMemoryMapAlignment`).
    pub(super) fn as_ptr(&self) -> *mut u8 {
        self.mapped.as_ptr()
    }

    /// Its length in bytes.
    pub(super) fn len(&self) -> usize {
        self.len
    }
}

impl Gpu {
    /// Whether [`Gpu::host_buffer`] makes buffers on this device: probed once (on a
    /// device without, every large upload would otherwise try and fail again).
    pub(crate) fn has_host_memory(&self) -> bool {
        *(self.host_memory).get_or_init(|| self.host_buffer(16, "gradfuse probe").is_some())
    }

    /// A [`HostBuffer`] of `bytes`, where the device is a Vulkan one with host-visible,
    /// host-coherent memory outside the device (on a device whose memory is all one, such
    /// as a CPU adapter or an integrated GPU, any host-visible memory); `None` elsewhere or
    /// where making it fails.
    pub(super) fn host_buffer(&self, bytes: u64, label: &str) -> Option<HostBuffer> {
        #[cfg(not(any(target_arch = "wasm32", target_vendor = "apple")))]
        {
            let unified = self.info.device_type != wgpu::DeviceType::DiscreteGpu;
            // SAFETY: the raw handles are used only while the device lives (`self`), the
            // buffer and memory they make are handed to wgpu, which destroys them.
            let (raw, mapped) = unsafe { vulkan::host_buffer(&self.device, bytes, unified) }?;
            // SAFETY: the buffer and its memory are this device's, bound to each other, and
            // handed over whole: wgpu destroys and frees them once the buffer is dropped.
            let hal = unsafe {
                wgpu::hal::vulkan::Buffer::from_raw_managed(raw.buffer, raw.memory, 0, raw.size)
            };
            // SAFETY: `hal` is a valid buffer of this device, not used otherwise; wgpu never
            // maps it (its usage has no MAP flag) and treats it as initialized. Its Vulkan
            // usage is both transfer directions, as here.
            let buffer = unsafe {
                self.device
                    .create_buffer_from_hal::<wgpu::hal::api::Vulkan>(
                        hal,
                        &wgpu::BufferDescriptor {
                            label: Some(label),
                            size: bytes,
                            usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                            mapped_at_creation: false,
                        },
                    )
            };
            Some(HostBuffer {
                buffer,
                mapped,
                len: bytes as usize,
            })
        }
        #[cfg(any(target_arch = "wasm32", target_vendor = "apple"))]
        {
            let _ = (bytes, label);
            None
        }
    }
}

#[cfg(not(any(target_arch = "wasm32", target_vendor = "apple")))]
mod vulkan {
    use ash::vk;
    use std::ptr::NonNull;

    /// A Vulkan buffer bound to memory of its own.
    pub(super) struct RawBuffer {
        pub(super) buffer: vk::Buffer,
        pub(super) memory: vk::DeviceMemory,
        pub(super) size: u64,
    }

    /// Makes a buffer of `bytes` (a source and a destination of copies) in host-visible, host-coherent memory
    /// outside the device (any host-visible memory where the device's is `unified`), maps
    /// it, and returns it with its mapping; `None` on another backend, without such
    /// memory, or on any failure (what was made is destroyed).
    ///
    /// # Safety
    /// The handles returned belong to `device` and must be handed to wgpu or destroyed.
    pub(super) unsafe fn host_buffer(
        device: &wgpu::Device,
        bytes: u64,
        unified: bool,
    ) -> Option<(RawBuffer, NonNull<u8>)> {
        // The hal device is held only to copy out its handles: wgpu is called again below.
        let (raw, instance, physical) = {
            let hal = unsafe { device.as_hal::<wgpu::hal::api::Vulkan>() }?;
            let instance = hal.shared_instance().raw_instance().clone();
            (
                hal.raw_device().clone(),
                instance,
                hal.raw_physical_device(),
            )
        };
        let info = vk::BufferCreateInfo::default()
            .size(bytes)
            .usage(vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        let buffer = unsafe { raw.create_buffer(&info, None) }.ok()?;
        let requirements = unsafe { raw.get_buffer_memory_requirements(buffer) };
        let properties = unsafe { instance.get_physical_device_memory_properties(physical) };
        let Some(type_index) = memory_type(&properties, requirements.memory_type_bits, unified)
        else {
            unsafe { raw.destroy_buffer(buffer, None) };
            return None;
        };
        let allocate = vk::MemoryAllocateInfo::default()
            .allocation_size(requirements.size)
            .memory_type_index(type_index);
        let Ok(memory) = (unsafe { raw.allocate_memory(&allocate, None) }) else {
            unsafe { raw.destroy_buffer(buffer, None) };
            return None;
        };
        let mapped = unsafe {
            raw.bind_buffer_memory(buffer, memory, 0).and_then(|()| {
                raw.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
            })
        };
        match mapped.ok().and_then(|p| NonNull::new(p.cast::<u8>())) {
            Some(mapped) => Some((
                RawBuffer {
                    buffer,
                    memory,
                    size: requirements.size,
                },
                mapped,
            )),
            None => {
                unsafe {
                    raw.destroy_buffer(buffer, None);
                    raw.free_memory(memory, None);
                }
                None
            }
        }
    }

    /// The memory type for host staging among `allowed` (a bit per type): host-visible
    /// and host-coherent, not device-local (on a `unified` device, device-local too),
    /// host-cached first (as CUDA's pinned memory).
    fn memory_type(
        properties: &vk::PhysicalDeviceMemoryProperties,
        allowed: u32,
        unified: bool,
    ) -> Option<u32> {
        let need = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let types = &properties.memory_types[..properties.memory_type_count as usize];
        let usable = |(i, t): &(usize, &vk::MemoryType)| {
            allowed & (1 << i) != 0
                && t.property_flags.contains(need)
                && (unified
                    || !t
                        .property_flags
                        .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL))
        };
        let cached = |t: &vk::MemoryType| {
            t.property_flags
                .contains(vk::MemoryPropertyFlags::HOST_CACHED)
        };
        let candidates: Vec<(usize, &vk::MemoryType)> =
            types.iter().enumerate().filter(usable).collect();
        (candidates.iter().find(|(_, t)| cached(t)))
            .or(candidates.first())
            .map(|(i, _)| *i as u32)
    }
}
