//! Instruction-count driver: runs each hot function `K` times over a fixed
//! input set, one exported `udah_icount_*` function per target, so that
//! `valgrind --tool=callgrind` can attribute instructions to each target.
//! `tests/icount_gate.rs` runs it at two `K` and divides the difference of
//! the inclusive instruction counts by the difference of `K`: setup costs
//! cancel, and what remains is the cost of one call plus the loop around it
//! (the `udah_icount_baseline` target measures that loop alone).
//!
//! Usage: `icount K` (runs every target `K` times); `icount --list`.

use core::hint::black_box;

use udah_benches::{Case, Family, Fixture, Order, SEED, branchy};
use udah_core::GidTable;
use udah_core::ah::libibverbs::IbvResult;
use udah_core::ah::{IbvAhAttr, IbvWc, Profile, kernel, libibverbs};
use udah_core::wire::{Area, Evidence};

struct Sets {
    fx4: Fixture<4>,
    fx64: Fixture<64>,
    fx256: Fixture<256>,
    mixed256: Vec<Case>,
}

/// A stand-in with the signature of `init_ah_from_wc` that does almost
/// nothing: `udah_icount_baseline_call` measures the harness around a call.
#[inline(never)]
fn null_init(_: &GidTable<256>, port_num: u8, wc: &IbvWc, area: Option<&Area>) -> IbvResult {
    let [a, ..] = *area.unwrap_or(&[0; 40]);
    Ok(IbvAhAttr { dlid: wc.slid, port_num, sl: a, ..IbvAhAttr::default() })
}

#[inline(always)]
fn drive<R>(cases: &[Case], k: u64, mut f: impl FnMut(&Case) -> R) {
    let mask = cases.len() - 1;
    debug_assert!(cases.len().is_power_of_two());
    let mut i = 0usize;
    for _ in 0..k {
        let c = black_box(&cases[i & mask]);
        // By reference: the result is built in place and the optimiser
        // must assume every byte of it is read, without the copy into
        // `black_box`'s own argument slot that passing it by value costs.
        let r = f(c);
        black_box(&r);
        i = i.wrapping_add(1);
    }
}

macro_rules! targets {
    ($($name:ident => |$s:ident| ($cases:expr, |$c:ident| $call:expr);)*) => {
        $(
            #[unsafe(no_mangle)]
            #[inline(never)]
            fn $name($s: &Sets, k: u64) {
                drive($cases, k, |$c: &Case| $call);
            }
        )*
        const TARGETS: &[(&str, fn(&Sets, u64))] = &[$((stringify!($name), $name)),*];
    };
}

targets! {
    udah_icount_baseline => |s| (&s.mixed256, |c| c.wc.slid);
    udah_icount_baseline_call => |s| (&s.mixed256, |c| null_init(&s.fx256.roce, 1, &c.wc, Some(&c.area)));
    udah_icount_libibverbs_ib_nogrh_4 => |s| (s.fx4.family(Family::IbNoGrh), |c| libibverbs::init_ah_from_wc(&s.fx4.roce, 1, &c.wc, Some(&c.area)));
    udah_icount_libibverbs_ib_nogrh_64 => |s| (s.fx64.family(Family::IbNoGrh), |c| libibverbs::init_ah_from_wc(&s.fx64.roce, 1, &c.wc, Some(&c.area)));
    udah_icount_libibverbs_ib_nogrh_256 => |s| (s.fx256.family(Family::IbNoGrh), |c| libibverbs::init_ah_from_wc(&s.fx256.roce, 1, &c.wc, Some(&c.area)));
    udah_icount_libibverbs_rocev1_4 => |s| (s.fx4.family(Family::RoceV1), |c| libibverbs::init_ah_from_wc(&s.fx4.roce, 1, &c.wc, Some(&c.area)));
    udah_icount_libibverbs_rocev1_64 => |s| (s.fx64.family(Family::RoceV1), |c| libibverbs::init_ah_from_wc(&s.fx64.roce, 1, &c.wc, Some(&c.area)));
    udah_icount_libibverbs_rocev1_256 => |s| (s.fx256.family(Family::RoceV1), |c| libibverbs::init_ah_from_wc(&s.fx256.roce, 1, &c.wc, Some(&c.area)));
    udah_icount_libibverbs_rocev2_ipv6_4 => |s| (s.fx4.family(Family::RoceV2Ipv6), |c| libibverbs::init_ah_from_wc(&s.fx4.roce, 1, &c.wc, Some(&c.area)));
    udah_icount_libibverbs_rocev2_ipv6_64 => |s| (s.fx64.family(Family::RoceV2Ipv6), |c| libibverbs::init_ah_from_wc(&s.fx64.roce, 1, &c.wc, Some(&c.area)));
    udah_icount_libibverbs_rocev2_ipv6_256 => |s| (s.fx256.family(Family::RoceV2Ipv6), |c| libibverbs::init_ah_from_wc(&s.fx256.roce, 1, &c.wc, Some(&c.area)));
    udah_icount_libibverbs_rocev2_ipv4_4 => |s| (s.fx4.family(Family::RoceV2Ipv4), |c| libibverbs::init_ah_from_wc(&s.fx4.roce, 1, &c.wc, Some(&c.area)));
    udah_icount_libibverbs_rocev2_ipv4_64 => |s| (s.fx64.family(Family::RoceV2Ipv4), |c| libibverbs::init_ah_from_wc(&s.fx64.roce, 1, &c.wc, Some(&c.area)));
    udah_icount_libibverbs_rocev2_ipv4_256 => |s| (s.fx256.family(Family::RoceV2Ipv4), |c| libibverbs::init_ah_from_wc(&s.fx256.roce, 1, &c.wc, Some(&c.area)));
    udah_icount_libibverbs_mixed_256 => |s| (&s.mixed256, |c| libibverbs::init_ah_from_wc(&s.fx256.roce, 1, &c.wc, Some(&c.area)));
    udah_icount_branchy_mixed_256 => |s| (&s.mixed256, |c| branchy::init_ah_from_wc(&s.fx256.roce, 1, &c.wc, Some(&c.area)));
    udah_icount_classify_branchfree_mixed => |s| (&s.mixed256, |c| libibverbs::classify(&c.area));
    udah_icount_classify_branchy_mixed => |s| (&s.mixed256, |c| branchy::classify(&c.area));
    udah_icount_route_mixed => |s| (&s.mixed256, |c| libibverbs::route_parts(&c.area));
    udah_icount_kernel_ib_nogrh_256 => |s| (s.fx256.family(Family::IbNoGrh), |c| kernel::init_ah_attr_from_wc(&s.fx256.ib, &c.kwc, Some(&c.area)));
    udah_icount_kernel_rocev1_256 => |s| (s.fx256.family(Family::RoceV1), |c| kernel::init_ah_attr_from_wc(&s.fx256.roce, &c.kwc, Some(&c.area)));
    udah_icount_kernel_rocev2_ipv6_256 => |s| (s.fx256.family(Family::RoceV2Ipv6), |c| kernel::init_ah_attr_from_wc(&s.fx256.roce, &c.kwc, Some(&c.area)));
    udah_icount_kernel_rocev2_ipv4_256 => |s| (s.fx256.family(Family::RoceV2Ipv4), |c| kernel::init_ah_attr_from_wc(&s.fx256.roce, &c.kwc, Some(&c.area)));
    // The pipeline's entry point, `Profile::words` (the word form the AH
    // cache keys on), for both profiles: what a `Responder` runs.
    udah_icount_words_libibverbs_rocev1_256 => |s| (s.fx256.family(Family::RoceV1), |c| Profile::Libibverbs.words(&s.fx256.roce, &c.wc, &c.area, Evidence::None, 64));
    udah_icount_words_libibverbs_rocev2_ipv6_256 => |s| (s.fx256.family(Family::RoceV2Ipv6), |c| Profile::Libibverbs.words(&s.fx256.roce, &c.wc, &c.area, Evidence::None, 64));
    udah_icount_words_libibverbs_rocev2_ipv4_256 => |s| (s.fx256.family(Family::RoceV2Ipv4), |c| Profile::Libibverbs.words(&s.fx256.roce, &c.wc, &c.area, Evidence::None, 64));
    udah_icount_words_kernel_ib_nogrh_256 => |s| (s.fx256.family(Family::IbNoGrh), |c| Profile::Kernel.words(&s.fx256.ib, &c.kwc, &c.area, Evidence::None, 64));
    udah_icount_words_kernel_rocev1_256 => |s| (s.fx256.family(Family::RoceV1), |c| Profile::Kernel.words(&s.fx256.roce, &c.kwc, &c.area, Evidence::None, 64));
    udah_icount_words_kernel_rocev2_ipv6_256 => |s| (s.fx256.family(Family::RoceV2Ipv6), |c| Profile::Kernel.words(&s.fx256.roce, &c.kwc, &c.area, Evidence::None, 64));
    udah_icount_words_kernel_rocev2_ipv4_256 => |s| (s.fx256.family(Family::RoceV2Ipv4), |c| Profile::Kernel.words(&s.fx256.roce, &c.kwc, &c.area, Evidence::None, 64));
}

fn main() {
    let arg = std::env::args().nth(1).unwrap_or_default();
    if arg == "--list" {
        for (name, _) in TARGETS {
            println!("{name}");
        }
        return;
    }
    let Ok(k) = arg.parse::<u64>() else {
        eprintln!("usage: icount K | icount --list");
        std::process::exit(2);
    };
    let fx256: Fixture<256> = Fixture::new(SEED);
    let mixed256 = fx256.mixed(Order::Repeating, SEED);
    let sets = Sets { fx4: Fixture::new(SEED), fx64: Fixture::new(SEED), fx256, mixed256 };
    for (_, f) in TARGETS {
        f(black_box(&sets), black_box(k));
    }
}
