//! `#[no_mangle]` wrappers around the functions that must compile to
//! straight-line code, for the codegen audit (`tests/codegen.rs`, in the
//! manner of zerocopy's golden-assembly tests).
//!
//! Each wrapper is `#[inline(never)]` and exported under a fixed symbol name,
//! so the release assembly of this crate contains exactly the code the
//! compiler produces for the wrapped function at a call site that knows
//! nothing about its input. The test fails on any conditional jump in these
//! bodies that its allow-list does not explain.

use udah_core::ah::kernel;
use udah_core::ah::libibverbs::{self, Classified};
use udah_core::wire::Area;
use udah_core::wire::detect::{self, Detection, Evidence, HeaderVersion, NetworkType, Stamp};

/// [`libibverbs::classify`]: header detection plus field extraction.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn udah_asm_classify(area: &Area) -> Classified {
    libibverbs::classify(area)
}

/// The hot path's lean classifier (`init_ah_from_wc` inlines it): the flags
/// and fields of [`libibverbs::classify`] without the failure detail.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn udah_asm_route(area: &Area) -> (bool, bool, [u64; 4], u8, u8) {
    libibverbs::route_parts(area)
}

/// [`detect::version_libibverbs`] (single-fold checksum).
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn udah_asm_version_libibverbs(area: &Area) -> HeaderVersion {
    detect::version_libibverbs(area)
}

/// [`detect::version_kernel`] (RFC 1071 checksum).
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn udah_asm_version_kernel(area: &Area) -> HeaderVersion {
    detect::version_kernel(area)
}

/// [`detect::detect`] without evidence.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn udah_asm_detect_none(area: &Area) -> Detection {
    detect::detect(area, Evidence::None)
}

/// [`detect::detect`] with a network type reported by the completion.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn udah_asm_detect_network_type(area: &Area, t: NetworkType) -> Detection {
    detect::detect(area, Evidence::NetworkType(t))
}

/// [`detect::detect`] with a pre-stamped area.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn udah_asm_detect_stamped(area: &Area, stamp: &Stamp) -> Detection {
    detect::detect(area, Evidence::Stamped(*stamp))
}

/// [`detect::detect`] with any evidence (the variant is dispatched on).
#[unsafe(no_mangle)]
#[inline(never)]
pub fn udah_asm_detect(area: &Area, evidence: Evidence) -> Detection {
    detect::detect(area, evidence)
}

/// [`kernel::net_type_by_grh`] (the kernel's heuristic for RoCE ports).
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn udah_asm_net_type_by_grh(area: &Area) -> NetworkType {
    kernel::net_type_by_grh(area)
}

/// The names of the wrappers above, for the codegen test.
pub const SYMBOLS: [&str; 9] = [
    "udah_asm_classify",
    "udah_asm_route",
    "udah_asm_version_libibverbs",
    "udah_asm_version_kernel",
    "udah_asm_detect_none",
    "udah_asm_detect_network_type",
    "udah_asm_detect_stamped",
    "udah_asm_detect",
    "udah_asm_net_type_by_grh",
];
